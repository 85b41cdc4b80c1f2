package config_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/personaq/personaq/retry"
)

// TestPolicyBudget: a persona policy's budget reaches its retry.Policy.
func TestPolicyBudget(t *testing.T) {
	t.Parallel()
	f := mustParse(t, "personas:\n  p:\n    invoker: {type: demo, demo: echo}\n    policy: {preset: llm, budget: {max_tokens: 200000, max_cost_usd: 2.5}}\n", nil)
	personas, err := f.Personas(nil)
	require.NoError(t, err)
	require.Equal(t, retry.UsageBudget{MaxTokens: 200_000, MaxCostUSD: 2.5}, personas[0].Policy.UsageBudget)

	f = mustParse(t, "personas:\n  p:\n    invoker: {type: demo, demo: echo}\n", nil)
	personas, err = f.Personas(nil)
	require.NoError(t, err)
	require.True(t, personas[0].Policy.UsageBudget.IsZero(), "no budget unless configured")
}

// TestPolicyBudgetInvalid: a bad budget fails loading, naming the field.
func TestPolicyBudgetInvalid(t *testing.T) {
	t.Parallel()
	for budget, want := range map[string]string{
		"{max_tokens: -1}":     "invalid config: personas.p.policy.budget.max_tokens: must not be negative, got -1",
		"{max_cost_usd: -0.5}": "invalid config: personas.p.policy.budget.max_cost_usd: must be a non-negative number, got -0.5",
		"{max_cost_usd: .nan}": "invalid config: personas.p.policy.budget.max_cost_usd: must be a non-negative number, got NaN",
		"{max_tokens: lots}":   "personas.p.policy: line 4: cannot unmarshal !!str `lots` into int64",
		"{max_tokenz: 5}":      `invalid config: personas.p.policy.budget.max_tokenz: line 4: unknown key "max_tokenz"`,
	} {
		_, err := parse(t, "personas:\n  p:\n    invoker: {type: demo, demo: echo}\n    policy: {budget: "+budget+"}\n", nil)
		require.Error(t, err, budget)
		got := problems(t, err)
		require.Len(t, got, 1, "%s: %v", budget, got)
		require.Contains(t, got[0], want, budget)
	}
}

// TestPolicyQueueWait: a persona policy's queue wait (how long a request
// may wait to start) reaches its retry.Policy on top of its preset; none
// unless configured; a negative one fails loading, naming the field.
func TestPolicyQueueWait(t *testing.T) {
	t.Parallel()
	f := mustParse(t, "personas:\n  p:\n    invoker: {type: demo, demo: echo}\n    policy: {preset: llm, queue_wait: 45s}\n", nil)
	personas, err := f.Personas(nil)
	require.NoError(t, err)
	require.Equal(t, 45*time.Second, personas[0].Policy.QueueWait)
	llm, err := retry.Preset("llm")
	require.NoError(t, err)
	require.Equal(t, llm.MaxAttempts, personas[0].Policy.MaxAttempts, "the preset's other settings stay")

	f = mustParse(t, "personas:\n  p:\n    invoker: {type: demo, demo: echo}\n    policy: llm\n", nil)
	personas, err = f.Personas(nil)
	require.NoError(t, err)
	require.Zero(t, personas[0].Policy.QueueWait, "no queue wait unless configured")

	_, err = parse(t, "personas:\n  p:\n    invoker: {type: demo, demo: echo}\n    policy: {queue_wait: -1s}\n", nil)
	require.ErrorContains(t, err, "personas.p.policy.queue_wait")
}
