package handlers

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// MaxRetryAfter caps a server's Retry-After: a misconfigured or hostile
// endpoint must not park a request for days.
const MaxRetryAfter = time.Hour

// maxStatusBody bounds the body kept in a StatusError: it ends up in logs,
// ledgers and quarantine records, which must stay small.
const maxStatusBody = 1024

// StatusError is a non-2xx answer from a persona's HTTP endpoint.
type StatusError struct {
	Code int
	// Type is the error type the persona named in a JSON body
	// ({"error_type":"CommitError"}, {"error":{"type":"CommitError"}} or
	// {"type":"CommitError"}); empty when it named none. Only simple type
	// names count: provider error codes such as invalid_request_error are
	// left to the status.
	Type string
	// Body is the start of the response body (at most 1 KiB).
	Body string
	// RetryAfter is the server's Retry-After, parsed and capped; 0 if none.
	RetryAfter time.Duration
}

func (e *StatusError) Error() string {
	msg := fmt.Sprintf("HTTP %d %s", e.Code, e.ErrorType())
	if e.Body == "" {
		return msg
	}
	return msg + ": " + e.Body
}

// ErrorType is the type the persona named (Type), or else the status named
// the way the Anthropic and OpenAI SDKs name their exceptions, so policies
// written for them (the llm preset: BadRequestError, AuthenticationError,
// …) match HTTP personas unchanged. It is the outermost type name that
// non-retryable lists are matched against.
func (e *StatusError) ErrorType() string {
	if e.Type != "" {
		return e.Type
	}
	switch e.Code {
	case http.StatusBadRequest:
		return "BadRequestError"
	case http.StatusUnauthorized:
		return "AuthenticationError"
	case http.StatusForbidden:
		return "PermissionDeniedError"
	case http.StatusNotFound:
		return "NotFoundError"
	case http.StatusRequestTimeout:
		return "RequestTimeoutError"
	case http.StatusConflict:
		return "ConflictError"
	case http.StatusRequestEntityTooLarge:
		return "RequestTooLargeError"
	case http.StatusUnprocessableEntity:
		return "UnprocessableEntityError"
	case http.StatusTooManyRequests:
		return "RateLimitError"
	case StatusOverloaded:
		return "OverloadedError"
	}
	if e.Code >= 500 && e.Code < 600 {
		return "InternalServerError"
	}
	return "HTTPError"
}

// StatusOverloaded is Anthropic's 529 "overloaded_error".
const StatusOverloaded = 529

// StatusOptions change how a status is classified.
type StatusOptions struct {
	// ValidationOn422 makes a 422 with a non-empty body a validation
	// failure: the body is fed back to the next attempt (retry with
	// feedback) instead
	// of quarantining the request. Default: false (422 is terminal).
	ValidationOn422 bool
}

// FromStatus classifies an HTTP status with the default StatusOptions.
func FromStatus(code int, body, retryAfter string, now time.Time) error {
	return StatusOptions{}.FromStatus(code, body, retryAfter, now)
}

// FromStatus classifies an HTTP status: nil for 2xx; retryable (honouring
// Retry-After) for 408, 429 and 5xx; validation for a 422 with a body when
// enabled; terminal for everything else. retryAfter is the raw header.
func (o StatusOptions) FromStatus(code int, body, retryAfter string, now time.Time) error {
	if code >= 200 && code < 300 {
		return nil
	}
	e := &StatusError{Code: code, Body: truncate(strings.TrimSpace(body), maxStatusBody)}
	e.Type, _ = parseErrorType([]byte(body), false)
	switch {
	case retryableStatus(code):
		e.RetryAfter = ParseRetryAfter(retryAfter, now)
		return After(e.RetryAfter, e)
	case code == http.StatusUnprocessableEntity && o.ValidationOn422 && strings.TrimSpace(body) != "":
		return Validation(e.Body, e)
	}
	// 1xx and 3xx land here too: an informational or unfollowed redirect
	// status will not change by asking again.
	return Terminal(e)
}

func retryableStatus(code int) bool {
	return code == http.StatusRequestTimeout || code == http.StatusTooManyRequests ||
		(code >= 500 && code < 600)
}

// ParseRetryAfter reads a Retry-After header: delay-seconds or an HTTP date
// (RFC 9110 §10.2.3). It returns 0 for an empty, malformed or past value and
// caps the result at MaxRetryAfter.
func ParseRetryAfter(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	if secs, err := strconv.ParseUint(v, 10, 63); err == nil || errors.Is(err, strconv.ErrRange) {
		if err != nil || secs > uint64(MaxRetryAfter/time.Second) {
			return MaxRetryAfter
		}
		return time.Duration(secs) * time.Second
	}
	at, err := http.ParseTime(v)
	if err != nil {
		return 0
	}
	return min(max(at.Sub(now), 0), MaxRetryAfter)
}

// truncate cuts s to at most n bytes without splitting a UTF-8 sequence.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}
