package handlers

import (
	"errors"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestProviderRetryAfter(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	cases := []struct {
		name    string
		code    int
		headers map[string]string
		want    time.Duration
	}{
		{"None", 429, nil, 0},
		{"RetryAfterSeconds", 429, map[string]string{"Retry-After": "7"}, 7 * time.Second},
		{"RetryAfterMsWins", 429, map[string]string{"Retry-After": "7", "retry-after-ms": "1500"}, 1500 * time.Millisecond},
		{"RetryAfterMsFraction", 503, map[string]string{"retry-after-ms": "20.5"}, 20500 * time.Microsecond},
		{"RetryAfterMsMalformedFallsBack", 429, map[string]string{"retry-after-ms": "soon", "Retry-After": "2"}, 2 * time.Second},
		{"ResetRequests", 429, map[string]string{"x-ratelimit-reset-requests": "6m0s"}, 6 * time.Minute},
		{"ResetTokensMs", 429, map[string]string{"x-ratelimit-reset-tokens": "20ms"}, 20 * time.Millisecond},
		{"ResetLongestOfBoth", 429, map[string]string{"x-ratelimit-reset-requests": "1s", "x-ratelimit-reset-tokens": "3.5s"}, 3500 * time.Millisecond},
		{"ResetOnlyExhaustedWindow", 429, map[string]string{
			"x-ratelimit-reset-requests": "1s", "x-ratelimit-remaining-requests": "0",
			"x-ratelimit-reset-tokens": "30s", "x-ratelimit-remaining-tokens": "1200",
		}, time.Second},
		{"ResetIgnoredOn5xx", 503, map[string]string{"x-ratelimit-reset-requests": "1s"}, 0},
		{"AnthropicReset", 529, map[string]string{"anthropic-ratelimit-requests-reset": "2026-11-24T12:00:09Z"}, 9 * time.Second},
		{"Capped", 429, map[string]string{"retry-after-ms": "999999999999"}, MaxRetryAfter},
		{"ResetBareSeconds", 429, map[string]string{"x-ratelimit-reset-requests": "2"}, 2 * time.Second},
		{"ResetMalformed", 429, map[string]string{"x-ratelimit-reset-requests": "later"}, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := http.Header{}
			for k, v := range tc.headers {
				h.Set(k, v)
			}
			require.Equal(t, tc.want, ProviderRetryAfter(tc.code, h, now))
		})
	}
}

func TestFromResponseCarriesProviderWait(t *testing.T) {
	t.Parallel()
	h := http.Header{}
	h.Set("x-ratelimit-reset-requests", "1.5s")
	err := StatusOptions{}.FromResponse(429, `{"error":{"type":"rate_limit_error"}}`, h, time.Now())
	c := Classify(err)
	require.Equal(t, 1500*time.Millisecond, c.RetryAfter)
	d, ok := Throttled(err)
	require.True(t, ok)
	require.Equal(t, 1500*time.Millisecond, d)
	require.NoError(t, StatusOptions{}.FromResponse(200, "ok", h, time.Now()))
}

func TestThrottledAndProviderFailed(t *testing.T) {
	t.Parallel()
	now := time.Now()
	cases := []struct {
		name      string
		err       error
		throttled bool
		failed    bool
	}{
		{"429", FromStatus(429, "", "", now), true, false},
		{"529", FromStatus(529, "", "", now), true, false},
		{"503", FromStatus(503, "", "", now), false, true},
		{"500Wrapped", fmt.Errorf("call: %w", FromStatus(500, "", "", now)), false, true},
		{"400", FromStatus(400, "", "", now), false, false},
		{"Network", Network(errors.New("connection refused")), false, true},
		{"Retryable", Retryable(errors.New("flaky")), false, false},
		{"Nil", nil, false, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, ok := Throttled(tc.err)
			require.Equal(t, tc.throttled, ok)
			require.Equal(t, tc.failed, ProviderFailed(tc.err))
		})
	}
}

// The runtime asks Throttled and ProviderFailed after every attempt, most
// of them successes: a nil error costs no allocation.
func TestThrottledNilAllocatesNothing(t *testing.T) {
	allocs := testing.AllocsPerRun(100, func() {
		_, _ = Throttled(nil)
		_ = ProviderFailed(nil)
	})
	require.Zero(t, allocs)
}
