package retry_test

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"

	"github.com/personaq/personaq/retry"
	"github.com/personaq/personaq/schemas"
)

// Persona request retry and the step budget: calculatedTimeout =
// (maxRetries+1) × personaTimeout + Σ backoff (30s, 60s, 90s …) + 30s
// buffer, for the three personas of its "Fast Feedback" list.
func TestStepBudget_PersonaBudgets(t *testing.T) {
	t.Parallel()
	tests := []struct {
		persona          string
		personaTimeoutMs int64
		wantTimeoutMs    int64
		wantMinutes      string
	}{
		{"context", 60000, 450000, "7.50"},       // 4 × 1 min + 3 min backoff + 30 s
		{"planner", 30000, 330000, "5.50"},       // 4 × 30 s + 3 min + 30 s
		{"lead-engineer", 90000, 570000, "9.50"}, // 4 × 90 s + 3 min + 30 s
		{"tester-qa", 60000, 450000, "7.50"},     // medium, like context
	}
	for _, tt := range tests {
		t.Run(tt.persona, func(t *testing.T) {
			t.Parallel()
			b := retry.NewBudget(retry.NewPersonaDefaults().Policy(tt.persona))
			require.Equal(t, tt.personaTimeoutMs, b.AttemptTimeout.Milliseconds())
			require.Equal(t, 3, b.MaxRetries)
			require.Equal(t, []time.Duration{30 * time.Second, 60 * time.Second, 90 * time.Second}, b.Backoffs)
			require.Equal(t, int64(180000), b.TotalBackoff.Milliseconds())
			require.Equal(t, 30*time.Second, b.Buffer)
			require.Equal(t, tt.wantTimeoutMs, b.StepDeadline.Milliseconds())
			require.Equal(t, []any{"step", "s", "persona", tt.persona, "timeoutMs", tt.wantTimeoutMs,
				"timeoutMinutes", tt.wantMinutes}, b.StepTimeoutFields("s"))
		})
	}
}

// The "Per-Step Retry Configuration" example: maxRetries 5 and timeout
// 120000 on a context step. Reading: a request's policy_overrides carry
// max_attempts (maxRetries + 1) and attempt_timeout_ms; the schedule stays
// linear, so the backoff is 30s+60s+90s+120s+150s.
func TestStepBudget_PerStepOverrideExample(t *testing.T) {
	t.Parallel()
	base := retry.NewPersonaDefaults().Policy("context")
	p, err := retry.ForRequest(base, "", retry.Overrides{MaxAttempts: 5 + 1, AttemptTimeout: 120000 * time.Millisecond}, nil)
	require.NoError(t, err)
	b := retry.NewBudget(p)
	require.Equal(t, 5, b.MaxRetries)
	require.Equal(t, int64(450000), b.TotalBackoff.Milliseconds())
	require.Equal(t, []any{"step", "context_request", "persona", "context",
		"personaTimeoutMs", int64(120000), "personaTimeoutMinutes", "2.00", "maxRetries", 5,
		"totalBackoffMs", int64(450000), "totalBackoffMinutes", "7.50",
		"calculatedTimeout", int64(1200000), "calculatedTimeoutMinutes", "20.00"}, b.CalculatedFields("context_request"))
	require.Equal(t, 60*time.Second, base.AttemptTimeout, "the persona's own policy is not modified")
}

// The "Example Logs" of the step budget: both start-up lines, field by
// field, for the context persona's context_request step.
func TestStepBudget_ExampleLogs(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	retry.LogBudget(zerolog.New(&buf), retry.NewBudget(retry.NewPersonaDefaults().Policy("context")), "context_request")
	dec := json.NewDecoder(&buf)
	var calculated, configured map[string]any
	require.NoError(t, dec.Decode(&calculated))
	require.NoError(t, dec.Decode(&configured))
	require.Equal(t, map[string]any{
		"level": "info", "message": "Calculated PersonaRequestStep timeout to accommodate retries",
		"step": "context_request", "persona": "context",
		"personaTimeoutMs": 60000.0, "personaTimeoutMinutes": "1.00", "maxRetries": 3.0,
		"totalBackoffMs": 180000.0, "totalBackoffMinutes": "3.00",
		"calculatedTimeout": 450000.0, "calculatedTimeoutMinutes": "7.50",
	}, calculated)
	require.Equal(t, map[string]any{
		"level": "info", "message": "Step timeout configured",
		"step": "context_request", "persona": "context", "timeoutMs": 450000.0, "timeoutMinutes": "7.50",
	}, configured)
}

// The "Retry Flow": four attempts, each timing out, with 30s, 60s and 90s
// waits; remainingRetries 3, 2, 1; then "all retries exhausted → task
// marked as blocked".
func TestStepBudget_RetryFlow(t *testing.T) {
	t.Parallel()
	p := retry.NewPersonaDefaults().Policy("context")
	timeout := retry.ClassTimeout
	walk(t, retry.Input{Policy: p}, []step{
		{at(1, timeout, -1), retryTo(2, primary, s30, time.Minute, 3)},
		{at(2, timeout, -1), retryTo(3, primary, s60, time.Minute, 2)},
		{at(3, timeout, -1), retryTo(4, primary, s90, time.Minute, 1)},
		{at(4, timeout, -1), final(retry.ActionQuarantine, schemas.ReasonExhausted)},
	})
	first := at(1, timeout, -1)
	d := retry.Decide(retry.Input{Policy: p, Current: first})
	require.Equal(t, "Persona request timed out, will retry", retry.Message(first, d, "t", "1-context", "context"))

	last := retry.Decide(retry.Input{Policy: p, History: []retry.Attempt{at(1, timeout, -1), at(2, timeout, -1), at(3, timeout, -1)},
		Current: at(4, timeout, -1)})
	require.True(t, last.Blocked)
	require.Contains(t, last.Detail, "all 4 attempts failed; task blocked")
	require.Equal(t, "[RETRY 4] API error: timeout on attempt 4 - all retries exhausted; task blocked",
		retry.Message(at(4, timeout, -1), last, "t", "1-context", "context"))
}

// "Global Defaults": personaTimeoutMaxRetries 3, personaDefaultTimeoutMs
// 600000, personaCodingTimeoutMs 180000; "Per-Persona Timeouts" from
// PERSONA_TIMEOUTS_JSON.
func TestStepBudget_GlobalDefaultsAndPersonaTimeouts(t *testing.T) {
	t.Parallel()
	d := retry.NewPersonaDefaults()
	require.Equal(t, 3, d.MaxRetries)
	require.Equal(t, int64(600000), d.DefaultTimeout.Milliseconds())
	require.Equal(t, int64(180000), d.CodingTimeout.Milliseconds())
	over, err := retry.ParsePersonaTimeoutsJSON(`{"context":60000,"lead-engineer":90000,"tester-qa":60000}`)
	require.NoError(t, err)
	d = d.Merge(over)
	for persona, ms := range map[string]int64{"context": 60000, "lead-engineer": 90000, "tester-qa": 60000, "planner": 30000, "other": 600000} {
		require.Equal(t, ms, d.Timeout(persona).Milliseconds(), persona)
	}
}
