package config_test

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/personaq/personaq/consumers/flow"
)

func TestFlowConfig(t *testing.T) {
	t.Parallel()
	f := mustParse(t, `
		limiters:
			openai-gpt5: {requests_per_minute: 500, tokens_per_minute: 300000, estimated_tokens: 2000}
			anthropic: {requests_per_minute: 50, cool_down: 5s}
		defaults:
			circuit: {failures: 4}
		personas:
			planner:
				invoker: {type: demo, demo: echo}
				rate_limit: {limiter: openai-gpt5}
			reviewer:
				invoker: {type: demo, demo: echo}
				rate_limit: {limiter: anthropic}
				circuit: {failures: 2, cool_down: 1m}
			local:
				invoker: {type: demo, demo: echo}
				circuit: {disabled: true}
	`, nil)
	ps, err := f.Personas(nil)
	require.NoError(t, err)
	require.Equal(t, "local", ps[0].Name)
	require.Equal(t, flow.Circuit{}, ps[0].Circuit, "disabled")
	require.Empty(t, ps[0].Limiter)
	require.Equal(t, "openai-gpt5", ps[1].Limiter)
	require.Equal(t, flow.Circuit{Failures: 4, CoolDown: 30 * time.Second}, ps[1].Circuit, "defaults.circuit, with the built-in cool-down")
	require.Equal(t, "anthropic", ps[2].Limiter)
	require.Equal(t, flow.Circuit{Failures: 2, CoolDown: time.Minute}, ps[2].Circuit)
	limits := f.Limits()
	require.Equal(t, flow.Limit{RequestsPerMinute: 500, TokensPerMinute: 300000, EstimatedTokens: 2000}, limits["openai-gpt5"])
	require.Equal(t, 5*time.Second, limits["anthropic"].CoolDown)
}

func TestFlowConfigValidation(t *testing.T) {
	t.Parallel()
	_, err := parse(t, `
		limiters:
			empty: {}
			"bad{name}": {requests_per_minute: 10}
			tokens: {tokens_per_minute: 100, estimated_tokens: 500}
		personas:
			planner:
				invoker: {type: demo, demo: echo}
				rate_limit: {limiter: openai}
				circuit: {failures: -1}
	`, nil)
	require.Error(t, err)
	got := problems(t, err)
	for _, want := range []string{
		`limiters.empty: requests_per_minute or tokens_per_minute: set at least one`,
		`limiters.bad{name}: limiter names use`,
		`limiters.tokens: estimated_tokens: 500 is more than tokens_per_minute (100)`,
		`personas.planner.rate_limit.limiter: unknown limiter "openai"`,
		`personas.planner.circuit.failures: must not be negative`,
	} {
		found := false
		for _, g := range got {
			if strings.Contains(g, want) {
				found = true
			}
		}
		require.True(t, found, "no problem %q in %q", want, got)
	}
}
