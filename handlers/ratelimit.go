package handlers

import (
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/personaq/personaq/retry"
)

// FromResponse classifies an HTTP answer like FromStatus, reading the wait
// a provider asks for from all of its headers (ProviderRetryAfter), not
// only Retry-After.
func (o StatusOptions) FromResponse(code int, body string, h http.Header, now time.Time) error {
	err := o.FromStatus(code, body, "", now)
	if err == nil || !retryableStatus(code) {
		return err
	}
	d := ProviderRetryAfter(code, h, now)
	var e *Error
	var se *StatusError
	if d > 0 && errors.As(err, &e) && errors.As(err, &se) {
		e.RetryAfter, se.RetryAfter = d, d
	}
	return err
}

// ProviderRetryAfter reads how long a provider asks to be left alone, capped
// at MaxRetryAfter; 0 when its headers do not say:
//
//   - retry-after-ms (OpenAI, Azure): milliseconds, preferred when present;
//   - Retry-After: seconds or an HTTP date;
//   - on a 429 or 529 without either, when its rate-limit windows reset:
//     x-ratelimit-reset-requests / x-ratelimit-reset-tokens (OpenAI: "1s",
//     "6m0s", "20ms") and anthropic-ratelimit-requests-reset /
//     -tokens-reset (RFC 3339). A window whose remaining count is reported
//     as non-zero is not the one that ran out and is skipped.
func ProviderRetryAfter(code int, h http.Header, now time.Time) time.Duration {
	if v := strings.TrimSpace(h.Get("retry-after-ms")); v != "" {
		if ms, err := strconv.ParseFloat(v, 64); err == nil && ms > 0 {
			return min(time.Duration(ms*float64(time.Millisecond)), MaxRetryAfter)
		}
	}
	if d := ParseRetryAfter(h.Get("Retry-After"), now); d > 0 {
		return d
	}
	if code != http.StatusTooManyRequests && code != StatusOverloaded {
		return 0
	}
	var longest time.Duration
	for _, w := range []string{"requests", "tokens"} {
		if exhausted(h, "x-ratelimit-remaining-"+w) {
			longest = max(longest, ParseResetDuration(h.Get("x-ratelimit-reset-"+w)))
		}
		if exhausted(h, "anthropic-ratelimit-"+w+"-remaining") {
			if at, err := time.Parse(time.RFC3339, strings.TrimSpace(h.Get("anthropic-ratelimit-"+w+"-reset"))); err == nil {
				longest = max(longest, at.Sub(now))
			}
		}
	}
	return min(longest, MaxRetryAfter)
}

// exhausted reports whether a remaining-count header is absent (unknown)
// or zero.
func exhausted(h http.Header, name string) bool {
	v := strings.TrimSpace(h.Get(name))
	return v == "" || v == "0"
}

// ParseResetDuration reads OpenAI's x-ratelimit-reset-* values: a Go-style
// duration ("1s", "6m0s", "20ms", "1h2m3.5s"), or bare seconds. It returns
// 0 for an empty or malformed value and caps at MaxRetryAfter.
func ParseResetDuration(v string) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	if secs, err := strconv.ParseFloat(v, 64); err == nil {
		if secs <= 0 {
			return 0
		}
		return min(time.Duration(secs*float64(time.Second)), MaxRetryAfter)
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		return 0
	}
	return min(d, MaxRetryAfter)
}

// Throttled reports whether err is a provider refusing for load, not
// failing: an HTTP 429 (rate limited) or 529 (overloaded). The runtime
// cools the persona's rate limiter down for every replica instead of
// treating it as the request's failure; d is the wait the provider asked
// for (0: none said).
func Throttled(err error) (d time.Duration, ok bool) {
	if err == nil { // the runtime asks after every success: no allocation then
		return 0, false
	}
	var se *StatusError
	if !errors.As(err, &se) || (se.Code != http.StatusTooManyRequests && se.Code != StatusOverloaded) {
		return 0, false
	}
	return se.RetryAfter, true
}

// ProviderFailed reports whether err says the provider itself failed: the
// endpoint could not be reached (a network failure) or answered 5xx other
// than 529 (overloaded, see Throttled). These are what open a persona's
// circuit; a 4xx, a validation failure or a timeout do not.
func ProviderFailed(err error) bool {
	if err == nil {
		return false
	}
	var se *StatusError
	if errors.As(err, &se) {
		return se.Code >= 500 && se.Code < 600 && se.Code != StatusOverloaded
	}
	return Classify(err).Class == retry.ClassNetwork
}
