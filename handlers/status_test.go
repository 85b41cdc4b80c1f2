package handlers

import (
	"net/http"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/personaq/personaq/retry"
)

var statusNow = time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)

func TestFromStatus(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		opts       StatusOptions
		code       int
		body       string
		retryAfter string
		class      retry.Class
		typeName   string
		wait       time.Duration
		feedback   string
	}{
		{name: "OK", code: 200, class: retry.ClassSucceeded},
		{name: "NoContent", code: 204, class: retry.ClassSucceeded},
		{name: "BadRequest", code: 400, class: retry.ClassTerminal, typeName: "BadRequestError"},
		{name: "Unauthorized", code: 401, class: retry.ClassTerminal, typeName: "AuthenticationError"},
		{name: "Forbidden", code: 403, class: retry.ClassTerminal, typeName: "PermissionDeniedError"},
		{name: "NotFound", code: 404, class: retry.ClassTerminal, typeName: "NotFoundError"},
		{name: "Conflict", code: 409, class: retry.ClassTerminal, typeName: "ConflictError"},
		{name: "TooLarge", code: 413, class: retry.ClassTerminal, typeName: "RequestTooLargeError"},
		{name: "Teapot", code: 418, class: retry.ClassTerminal, typeName: "HTTPError"},
		{name: "Unprocessable", code: 422, body: "bad", class: retry.ClassTerminal, typeName: "UnprocessableEntityError"},
		{name: "UnprocessableAsValidation", opts: StatusOptions{ValidationOn422: true}, code: 422,
			body: `{"error":"summary missing"}`, class: retry.ClassValidation, typeName: "UnprocessableEntityError",
			feedback: `{"error":"summary missing"}`},
		{name: "UnprocessableEmptyBodyStaysTerminal", opts: StatusOptions{ValidationOn422: true}, code: 422,
			body: " \n", class: retry.ClassTerminal, typeName: "UnprocessableEntityError"},
		{name: "RetryAfterIgnoredWhenTerminal", code: 400, retryAfter: "5", class: retry.ClassTerminal, typeName: "BadRequestError"},
		{name: "RequestTimeout", code: 408, class: retry.ClassRetryable, typeName: "RequestTimeoutError"},
		{name: "RateLimited", code: 429, class: retry.ClassRetryable, typeName: "RateLimitError"},
		{name: "RateLimitedRetryAfterSeconds", code: 429, retryAfter: "7", class: retry.ClassRetryable,
			typeName: "RateLimitError", wait: 7 * time.Second},
		{name: "RateLimitedRetryAfterDate", code: 429, retryAfter: statusNow.Add(90 * time.Second).Format(http.TimeFormat),
			class: retry.ClassRetryable, typeName: "RateLimitError", wait: 90 * time.Second},
		{name: "InternalServerError", code: 500, class: retry.ClassRetryable, typeName: "InternalServerError"},
		{name: "BadGateway", code: 502, class: retry.ClassRetryable, typeName: "InternalServerError"},
		{name: "ServiceUnavailable", code: 503, retryAfter: "120", class: retry.ClassRetryable,
			typeName: "InternalServerError", wait: 2 * time.Minute},
		{name: "GatewayTimeout", code: 504, class: retry.ClassRetryable, typeName: "InternalServerError"},
		{name: "Overloaded", code: 529, retryAfter: "30", class: retry.ClassRetryable, typeName: "OverloadedError", wait: 30 * time.Second},
		{name: "Redirect", code: 302, class: retry.ClassTerminal, typeName: "HTTPError"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := tt.opts.FromStatus(tt.code, tt.body, tt.retryAfter, statusNow)
			c := Classify(err)
			require.Equal(t, tt.class, c.Class, "error: %v", err)
			require.Equal(t, tt.wait, c.RetryAfter)
			require.Equal(t, tt.feedback, c.Feedback)
			if tt.class == retry.ClassSucceeded {
				require.NoError(t, err)
				return
			}
			require.Equal(t, []string{tt.typeName}, c.TypeNames)
			var se *StatusError
			require.ErrorAs(t, err, &se)
			require.Equal(t, tt.code, se.Code)
			require.Equal(t, tt.wait, se.RetryAfter)
		})
	}
}

func TestFromStatusUsesDefaultOptions(t *testing.T) {
	t.Parallel()
	err := FromStatus(422, "summary missing", "", statusNow)
	require.Equal(t, retry.ClassTerminal, Classify(err).Class)
}

func TestStatusErrorText(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		err  *StatusError
		want string
	}{
		{"WithBody", &StatusError{Code: 429, Body: "slow down"}, "HTTP 429 RateLimitError: slow down"},
		{"WithoutBody", &StatusError{Code: 503}, "HTTP 503 InternalServerError"},
		{"Unnamed", &StatusError{Code: 451}, "HTTP 451 HTTPError"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			require.EqualError(t, tt.err, tt.want)
		})
	}
}

func TestFromStatusTruncatesBody(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		body string
	}{
		{"ASCII", strings.Repeat("x", 5000)},
		{"CutInsideARune", "x" + strings.Repeat("é", 2000)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var se *StatusError
			require.ErrorAs(t, FromStatus(500, tt.body, "", statusNow), &se)
			require.LessOrEqual(t, len(se.Body), maxStatusBody+len("…"))
			require.True(t, strings.HasSuffix(se.Body, "…"))
			require.True(t, utf8.ValidString(se.Body))
			require.True(t, strings.HasPrefix(tt.body, strings.TrimSuffix(se.Body, "…")))
		})
	}
}

func TestParseRetryAfter(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		value string
		want  time.Duration
	}{
		{"Empty", "", 0},
		{"Zero", "0", 0},
		{"Seconds", "120", 2 * time.Minute},
		{"SecondsWithSpaces", " 5 ", 5 * time.Second},
		{"Negative", "-1", 0},
		{"Fraction", "1.5", 0},
		{"Garbage", "soon", 0},
		{"CapExactly", "3600", MaxRetryAfter},
		{"OverCap", "86400", MaxRetryAfter},
		{"Overflow", "99999999999999999999999", MaxRetryAfter},
		{"IMFDate", statusNow.Add(90 * time.Second).Format(http.TimeFormat), 90 * time.Second},
		{"RFC850Date", statusNow.Add(time.Minute).Format(time.RFC850), time.Minute},
		{"ANSICDate", statusNow.Add(time.Minute).Format(time.ANSIC), time.Minute},
		{"PastDate", statusNow.Add(-time.Minute).Format(http.TimeFormat), 0},
		{"FarFutureDate", statusNow.Add(72 * time.Hour).Format(http.TimeFormat), MaxRetryAfter},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tt.want, ParseRetryAfter(tt.value, statusNow))
		})
	}
}
