package retry_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/stretchr/testify/require"

	"github.com/personaq/personaq/retry"
	"github.com/personaq/personaq/schemas"
)

// ignoreText leaves the operator prose and the feedback list to the tests
// that are about them.
var ignoreText = cmpopts.IgnoreFields(retry.Decision{}, "Detail", "Feedback")

// at builds attempt n of a request with a fallback agent, stopped at
// completed/9 (completed < 0: progress not tracked).
func at(n int, c retry.Class, completed int) retry.Attempt {
	a := retry.Attempt{Number: n, Role: retry.RoleFor(n, true), Class: c, Error: fmt.Sprintf("%s on attempt %d", c, n)}
	if completed >= 0 {
		a.Progress = retry.Progress{Completed: completed, Total: 9}
	}
	return a
}

// step is one attempt of a walk and the decision it must produce.
type step struct {
	attempt retry.Attempt
	want    retry.Decision
}

// walk decides each attempt with the earlier ones as history.
func walk(t *testing.T, in retry.Input, steps []step) {
	t.Helper()
	var history []retry.Attempt
	for _, s := range steps {
		in.History, in.Current = history, s.attempt
		got := retry.Decide(in)
		if diff := cmp.Diff(s.want, got, ignoreText); diff != "" {
			t.Fatalf("attempt %d (-want +got):\n%s\ndetail: %s", s.attempt.Number, diff, got.Detail)
		}
		history = append(history, s.attempt)
	}
}

func retryTo(next int, role retry.Role, delay, timeout time.Duration, remaining int) retry.Decision {
	return retry.Decision{Action: retry.ActionRetry, Delay: delay, NextAttempt: next, Role: role,
		Timeout: timeout, ProgressInterval: retry.DefaultProgressInterval, RemainingRetries: remaining, Counted: true}
}

// final is a stop; a quarantine leaves the task blocked, a deferral or an
// escalation does not.
func final(a retry.Action, reason schemas.Reason) retry.Decision {
	return retry.Decision{Action: a, Reason: reason, Counted: true, Blocked: a == retry.ActionQuarantine}
}

// deferAt is a deferral at a plateau of completed/9.
func deferAt(completed int) retry.Decision {
	return retry.Decision{Action: retry.ActionDefer, Reason: schemas.ReasonDeferred, Counted: true,
		Plateau: &retry.Progress{Completed: completed, Total: 9}}
}

const (
	s30  = 30 * time.Second
	s60  = 60 * time.Second
	s90  = 90 * time.Second
	s120 = 120 * time.Second
	tmo  = retry.DefaultPersonaTimeout // the adaptive preset's attempt timeout
)

var (
	primary  = retry.RolePrimary
	fallback = retry.RoleFallback
	failed   = retry.ClassRetryable
)

// TestDecideOneCounter mixes failure classes: one attempt counter stops them all.
func TestDecideOneCounter(t *testing.T) {
	t.Parallel()
	p := retry.PersonaPolicy(time.Minute)
	walk(t, retry.Input{Policy: p}, []step{
		{at(1, retry.ClassTimeout, -1), retryTo(2, primary, s30, time.Minute, 3)},
		{at(2, retry.ClassNetwork, -1), retryTo(3, primary, s60, time.Minute, 2)},
		{at(3, retry.ClassValidation, -1), retryTo(4, primary, 0, time.Minute, 1)},
		{at(4, retry.ClassRetryable, -1), final(retry.ActionQuarantine, schemas.ReasonExhausted)},
	})
}

// TestDecideFeedback follows retry with feedback: validation retries at once, every
// earlier error reaches the next attempt in order, and the last attempt's
// failure is final.
func TestDecideFeedback(t *testing.T) {
	t.Parallel()
	p := retry.Policy{Name: "implement", MaxAttempts: 4, AttemptTimeout: time.Minute}
	history := []retry.Attempt{
		{Number: 1, Class: retry.ClassValidation, Error: "invalid code", Feedback: "SyntaxError: unterminated string literal (line 3)"},
		{Number: 2, Class: retry.ClassRetryable, Error: "API error: 529 overloaded"},
	}
	cur := retry.Attempt{Number: 3, Class: retry.ClassValidation, Error: "invalid code", Feedback: "IndentationError (line 7)"}
	got := retry.Decide(retry.Input{Policy: p, History: history, Current: cur})
	require.Equal(t, retry.ActionRetry, got.Action)
	require.Equal(t, time.Duration(0), got.Delay)
	require.Equal(t, 4, got.NextAttempt)
	require.Equal(t, []string{
		"attempt 1 (validation): SyntaxError: unterminated string literal (line 3)",
		"attempt 2 (retryable): API error: 529 overloaded",
		"attempt 3 (validation): IndentationError (line 7)",
	}, got.Feedback)

	last := retry.Decide(retry.Input{Policy: p, History: append(history, cur),
		Current: retry.Attempt{Number: 4, Class: retry.ClassValidation, Error: "invalid code"}})
	require.Equal(t, retry.ActionQuarantine, last.Action)
	require.Equal(t, schemas.ReasonExhausted, last.Reason)
}

func TestDecideSingleOutcomes(t *testing.T) {
	t.Parallel()
	persona := retry.PersonaPolicy(time.Minute)
	tests := []struct {
		name       string
		policy     retry.Policy
		current    retry.Attempt
		want       retry.Decision
		wantDetail string
	}{
		{"SuccessAcks", persona, retry.Attempt{Number: 2, Class: retry.ClassSucceeded},
			retry.Decision{Action: retry.ActionAck, Counted: true}, ""},
		{"InvalidMessageQuarantines", persona, retry.Attempt{Number: 1, Class: retry.ClassInvalidMessage, Error: "bad json"},
			final(retry.ActionQuarantine, schemas.ReasonInvalidMessage), "bad json"},
		{"TerminalQuarantines", persona, retry.Attempt{Number: 1, Class: retry.ClassTerminal, Error: "no such persona"},
			final(retry.ActionQuarantine, schemas.ReasonTerminal), "no such persona"},
		{"NonRetryableTypeAfterOneAttempt", retry.GitPolicy(),
			retry.Attempt{Number: 1, Class: retry.ClassRetryable, ErrorTypes: []string{"CommitError"}, Error: "Nothing to commit"},
			final(retry.ActionQuarantine, schemas.ReasonTerminal), "non-retryable error type CommitError under policy \"git\""},
		{"NonRetryableNamesTheMatchedType", retry.LLMPolicy(),
			retry.Attempt{Number: 1, Class: retry.ClassRetryable, ErrorTypes: []string{"BadRequestError", "StatusError"}},
			final(retry.ActionQuarantine, schemas.ReasonTerminal), "error type BadRequestError"},
		{"NonRetryableTypeDeeperInChainRetries", llmMidJitter(),
			retry.Attempt{Number: 1, Class: retry.ClassRetryable, ErrorTypes: []string{"ActivityError", "BadRequestError"}},
			retryTo(2, primary, time.Second, retry.DefaultLLMAttemptTimeout, 2), ""},
		{"UnlistedTypeRetries", llmMidJitter(),
			retry.Attempt{Number: 1, Class: retry.ClassRetryable, ErrorTypes: []string{"RateLimitError"}},
			retryTo(2, primary, time.Second, retry.DefaultLLMAttemptTimeout, 2), ""},
		{"SnoozeKeepsAttemptNumber", persona,
			retry.Attempt{Number: 2, Class: retry.ClassSnooze, RetryAfter: 5 * time.Minute},
			retry.Decision{Action: retry.ActionRetry, Delay: 5 * time.Minute, NextAttempt: 2, Role: primary,
				Timeout: time.Minute, ProgressInterval: retry.DefaultProgressInterval, RemainingRetries: 3, Counted: false}, "not counted"},
		{"SnoozeNegativeDelayIsZero", persona,
			retry.Attempt{Number: 1, Class: retry.ClassSnooze, RetryAfter: -time.Second},
			retry.Decision{Action: retry.ActionRetry, NextAttempt: 1, Role: primary, Timeout: time.Minute,
				ProgressInterval: retry.DefaultProgressInterval, RemainingRetries: 4}, ""},
		{"RetryAfterOverridesSchedule", persona,
			retry.Attempt{Number: 1, Class: retry.ClassRetryable, RetryAfter: 7 * time.Second},
			retryTo(2, primary, 7*time.Second, time.Minute, 3), ""},
		{"RetryAfterOverridesNetworkDelay", persona,
			retry.Attempt{Number: 1, Class: retry.ClassNetwork, RetryAfter: 10 * time.Second},
			retryTo(2, primary, 10*time.Second, time.Minute, 3), ""},
		{"RetryAfterIsCapped", persona,
			retry.Attempt{Number: 1, Class: retry.ClassRetryable, RetryAfter: 1000 * time.Hour},
			retryTo(2, primary, 24*time.Hour, time.Minute, 3), ""},
		{"NegativeCustomScheduleFallsBackAndWarns",
			retry.Policy{Name: "custom", MaxAttempts: 3, AttemptTimeout: time.Minute,
				Schedule: scheduleFunc(func(int) time.Duration { return -time.Second })},
			retry.Attempt{Number: 2, Class: retry.ClassRetryable},
			func() retry.Decision {
				d := retryTo(3, primary, s60, time.Minute, 1)
				d.Warning = "schedule custom returned an out-of-range delay for retry 2; used 1m0s"
				return d
			}(), ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := retry.Decide(retry.Input{Policy: tt.policy, Current: tt.current})
			if diff := cmp.Diff(tt.want, got, ignoreText); diff != "" {
				t.Fatalf("(-want +got):\n%s", diff)
			}
			require.Contains(t, got.Detail, tt.wantDetail)
		})
	}
}

func TestDecideDoesNotAliasHistory(t *testing.T) {
	t.Parallel()
	history := make([]retry.Attempt, 1, 4)
	history[0] = at(1, failed, 1)
	spare := history[:2]
	spare[1] = at(99, failed, 1)
	retry.Decide(retry.Input{Policy: retry.AdaptivePolicy(), History: history, Current: at(2, failed, 2)})
	require.Equal(t, 99, spare[1].Number, "Decide must not write into the history's spare capacity")
}

// llmMidJitter is the llm preset with a jitter source that always draws the
// middle, so its delays are the nominal 1s, 2s, 4s …
func llmMidJitter() retry.Policy {
	p := retry.LLMPolicy()
	e := retry.TemporalExponential()
	e.Rand = constRand(0.5)
	p.Schedule = e
	return p
}

// TestNextAgreesWithDecide guards next.go (used on redelivery) against
// drifting from Decide: the timeout and feedback it recomputes for attempt
// n+1 are the ones Decide chose after attempt n.
func TestNextAgreesWithDecide(t *testing.T) {
	t.Parallel()
	attempts := []retry.Attempt{at(1, failed, 5), at(2, failed, 4), at(3, retry.ClassValidation, 5), at(4, failed, 6)}
	p := retry.AdaptivePolicy()
	for i := range attempts {
		t.Run(fmt.Sprintf("Attempt%d", i+1), func(t *testing.T) {
			t.Parallel()
			d := retry.Decide(retry.Input{Policy: p, HasFallback: true, History: attempts[:i], Current: attempts[i]})
			require.Equal(t, retry.ActionRetry, d.Action)
			require.Equal(t, d.Timeout, retry.TimeoutFor(p, attempts[:i+1], d.NextAttempt))
			require.Equal(t, d.Feedback, retry.FeedbackFor(attempts[:i+1]))
			require.Equal(t, d.ProgressInterval, retry.ProgressIntervalFor(p, attempts[:i+1]))
		})
	}
}
