package cli_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// explained runs policy explain -o json and returns its step deadlines and
// attempts by persona.
func explained(t *testing.T, env map[string]string, args ...string) map[string][2]int64 {
	t.Helper()
	for k, v := range env {
		t.Setenv(k, v)
	}
	code, out, errOut := run(t, context.Background(), append([]string{"policy", "explain", "-o", "json"}, args...)...)
	require.Equal(t, 0, code, errOut)
	var got []struct {
		Persona        string `json:"persona"`
		MaxAttempts    int64  `json:"maxAttempts"`
		StepDeadlineMs int64  `json:"stepDeadlineMs"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &got))
	m := map[string][2]int64{}
	for _, e := range got {
		m[e.Persona] = [2]int64{e.MaxAttempts, e.StepDeadlineMs}
	}
	return m
}

// policy explain honours the configuration file (timeouts, presets,
// defaults.max_retries, environment overrides) and a request's policy and
// policy_overrides. Not parallel: it sets environment variables.
func TestPolicyExplainHonoursConfigAndRequest(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "personaq.yaml")
	require.NoError(t, os.WriteFile(cfg, []byte(`
defaults: {max_retries: 2}
personas:
  context:
    invoker: {type: demo, demo: echo}
    timeout: 2m
  planner:
    invoker: {type: demo, demo: echo}
    policy: {preset: persona, max_attempts: 2, schedule: {type: fixed, every: 10s}}
`), 0o600))
	req := filepath.Join(dir, "req.json")
	// The step budget's per-step override example: maxRetries 5, timeout 120000.
	require.NoError(t, os.WriteFile(req, []byte(`{"persona":"context","policy_overrides":{"max_attempts":6,"attempt_timeout_ms":120000}}`), 0o600))

	// 3 × 2m + (30s + 60s) + 30s; 2 × 30s + 10s + 30s
	require.Equal(t, map[string][2]int64{"context": {3, 480000}, "planner": {2, 100000}}, explained(t, nil, "--config", cfg))
	// The environment beats the file, as in serve.
	require.Equal(t, map[string][2]int64{"context": {3, 150000}}, // 3 × 10s + 90s + 30s
		explained(t, map[string]string{"PERSONA_TIMEOUTS_JSON": `{"context":10000}`}, "--config", cfg, "--persona", "context"))
	// 6 × 2m + (30+60+90+120+150)s + 30s = 20 min, config or not.
	require.Equal(t, map[string][2]int64{"context": {6, 1200000}}, explained(t, nil, "--config", cfg, "--request", "@"+req))
	require.Equal(t, map[string][2]int64{"context": {6, 1200000}}, explained(t, nil, "--request", "@"+req))
	// A request naming another preset keeps the persona's timeout.
	require.Equal(t, map[string][2]int64{"context": {3, 30*60000 + 3000 + 30000 + 600}},
		explained(t, nil, "--request", `{"persona":"context","policy":"llm","policy_overrides":{"attempt_timeout_ms":600000}}`))

	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"--config", cfg, "--persona", "nobody"}, `invalid flag --persona: "nobody" is not a persona of`},
		{[]string{"--request", `{"persona":"context"}`, "--persona", "planner"}, "the request is for persona \"context\""},
		{[]string{"--request", `{"persona":"context"}`, "--preset", "llm"}, "invalid flag --preset: a request names its own policy"},
		{[]string{"--request", `{"persona":"context","policy_overrides":{"max_attempts":5000}}`}, "max_attempts: must be in [1,1000]"},
		{[]string{"--request", `not json`}, "invalid flag --request: not a persona request"},
		{[]string{"--config", filepath.Join(dir, "missing.yaml")}, "missing.yaml"},
	} {
		code, _, errOut := run(t, context.Background(), append([]string{"policy", "explain"}, tt.args...)...)
		require.Equal(t, 1, code, tt.args)
		require.Contains(t, errOut, tt.want, tt.args)
	}
}
