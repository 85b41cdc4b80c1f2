package retry_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/personaq/personaq/retry"
)

// Retry with feedback: MAX_FILE_RETRIES = 3 attempts,
// validation failures retried at once with the error fed into the next
// attempt, API errors retried too, a hard fail only after the last attempt,
// and "[RETRY {attempt+1}]" log lines. Reading: the attempt is
// 0-indexed, so "[RETRY N]" numbers the attempt that failed, 1-based (the
// first failure is [RETRY 1]); the final failure is tagged too, followed by
// what became of the task.
func TestRetryWithFeedback_TestScenarios(t *testing.T) {
	t.Parallel()
	policy := retry.Policy{Name: "implement", MaxAttempts: 3, AttemptTimeout: time.Minute}
	invalid := func(n int, err string) retry.Attempt {
		return retry.Attempt{Number: n, Class: retry.ClassValidation, Error: "invalid code", Feedback: err}
	}
	apiErr := func(n int, err string) retry.Attempt {
		return retry.Attempt{Number: n, Class: retry.ClassRetryable, Error: err}
	}
	valid := func(n int) retry.Attempt { return retry.Attempt{Number: n, Class: retry.ClassSucceeded} }
	tests := []struct {
		name      string
		attempts  []retry.Attempt
		wantLog   []string
		wantFinal retry.Action
	}{
		{"010_SuccessOnFirstAttempt", []retry.Attempt{valid(1)},
			[]string{"Persona request succeeded"}, retry.ActionAck},
		{"020_SuccessOnSecondAttemptAfterValidationError",
			[]retry.Attempt{invalid(1, "SyntaxError: unterminated string literal (line 3)"), valid(2)},
			[]string{"[RETRY 1] Validation: SyntaxError: unterminated string literal (line 3)", "Persona request succeeded"},
			retry.ActionAck},
		{"030_SuccessOnSecondAttemptAfterAPIError",
			[]retry.Attempt{apiErr(1, "529 overloaded_error"), valid(2)},
			[]string{"[RETRY 1] API error: 529 overloaded_error", "Persona request succeeded"}, retry.ActionAck},
		{"040_FailureAfter3ValidationErrors",
			[]retry.Attempt{invalid(1, "e1"), invalid(2, "e2"), invalid(3, "e3")},
			[]string{"[RETRY 1] Validation: e1", "[RETRY 2] Validation: e2",
				"[RETRY 3] Validation: e3 - all retries exhausted; task blocked"}, retry.ActionQuarantine},
		{"050_FailureAfter3APIErrors",
			[]retry.Attempt{apiErr(1, "e1"), apiErr(2, "e2"), apiErr(3, "e3")},
			[]string{"[RETRY 1] API error: e1", "[RETRY 2] API error: e2",
				"[RETRY 3] API error: e3 - all retries exhausted; task blocked"}, retry.ActionQuarantine},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var logs []string
			var d retry.Decision
			for i, a := range tt.attempts {
				d = retry.Decide(retry.Input{Policy: policy, History: tt.attempts[:i], Current: a})
				logs = append(logs, retry.Message(a, d, "t", "implement", "coder"))
				if d.Action == retry.ActionRetry {
					require.Equal(t, a.Number+1, d.NextAttempt)
					if a.Class == retry.ClassValidation {
						require.Zero(t, d.Delay, "validation retries are fast")
					}
				}
			}
			require.Equal(t, tt.wantLog, logs)
			require.Equal(t, tt.wantFinal, d.Action)
			require.Equal(t, tt.wantFinal == retry.ActionQuarantine, d.Blocked, "hard fail only after exhaustion")
		})
	}
}

// Scenario 060: the error context reaches the retry prompt, every earlier
// error in order.
func TestRetryWithFeedback_060_ErrorContextInRetryPrompt(t *testing.T) {
	t.Parallel()
	p := retry.Policy{Name: "implement", MaxAttempts: 3, AttemptTimeout: time.Minute}
	first := retry.Attempt{Number: 1, Class: retry.ClassValidation, Error: "invalid code",
		Feedback: "SyntaxError: unterminated string literal (line 3)"}
	d := retry.Decide(retry.Input{Policy: p, Current: first})
	require.Equal(t, []string{"attempt 1 (validation): SyntaxError: unterminated string literal (line 3)"}, d.Feedback)
	second := retry.Attempt{Number: 2, Class: retry.ClassRetryable, Error: "API error: 529 overloaded"}
	d = retry.Decide(retry.Input{Policy: p, History: []retry.Attempt{first}, Current: second})
	require.Equal(t, []string{
		"attempt 1 (validation): SyntaxError: unterminated string literal (line 3)",
		"attempt 2 (retryable): API error: 529 overloaded",
	}, d.Feedback)
	require.Equal(t, d.Feedback, retry.FeedbackFor([]retry.Attempt{first, second}), "the runtime recomputes the same list")
}

// Scenario 070: "[RETRY N]" for every failure class, N the failed attempt;
// a timeout keeps the step budget's own line.
func TestRetryWithFeedback_070_RetryLoggingFormat(t *testing.T) {
	t.Parallel()
	p := retry.PersonaPolicy(time.Minute)
	tests := []struct {
		attempt retry.Attempt
		want    string
	}{
		{retry.Attempt{Number: 1, Class: retry.ClassValidation, Error: "invalid", Feedback: "missing summary"}, "[RETRY 1] Validation: missing summary"},
		{retry.Attempt{Number: 2, Class: retry.ClassValidation, Error: "invalid answer"}, "[RETRY 2] Validation: invalid answer"},
		{retry.Attempt{Number: 1, Class: retry.ClassRetryable, Error: "HTTP 503"}, "[RETRY 1] API error: HTTP 503"},
		{retry.Attempt{Number: 3, Class: retry.ClassNetwork, Error: "connection refused"}, "[RETRY 3] API error: connection refused"},
		{retry.Attempt{Number: 1, Class: retry.ClassTimeout, Error: "deadline"}, "Persona request timed out, will retry"},
		{retry.Attempt{Number: 1, Class: retry.ClassTerminal, Error: "HTTP 400"}, "[RETRY 1] API error: HTTP 400 - not retryable; task blocked"},
		{retry.Attempt{Number: 2, Class: retry.ClassSnooze, RetryAfter: time.Minute}, "Persona request snoozed; attempt not counted"},
	}
	for _, tt := range tests {
		d := retry.Decide(retry.Input{Policy: p, Current: tt.attempt})
		require.Equal(t, tt.want, retry.Message(tt.attempt, d, "t", "s", "p"))
	}
}
