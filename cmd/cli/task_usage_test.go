package cli_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/personaq/personaq/consumers/wire"
	"github.com/personaq/personaq/integration/testenv"
)

// TestTaskShowPrintsUsageAndBudgetExhausted serves a command persona that
// reports usage on every failed attempt under a policy token budget: the
// request ends budget_exhausted after the second attempt, and `task show`
// prints each attempt's tokens and cost, the step's total and the terminal
// record's sum.
func TestTaskShowPrintsUsageAndBudgetExhausted(t *testing.T) {
	t.Parallel()
	n := testenv.StartNATS(t)
	r := testenv.StartRedis(t)
	script := `echo '{"personaq_usage":{"input_tokens":400,"output_tokens":100,"cost_usd":0.25}}'; echo 'the model answered nonsense' >&2; exit 75`
	yaml := `personas:
  spender:
    invoker: {type: command, path: /bin/sh, args: ["-c", ` + jsonString(script) + `]}
    timeout: 5s
    policy: {preset: persona, schedule: {type: fixed, every: 100ms}, budget: {max_tokens: 1200}}
`
	cfgPath := filepath.Join(t.TempDir(), "personaq.yaml")
	require.NoError(t, os.WriteFile(cfgPath, []byte(yaml), 0o600))
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan struct{})
	go func() {
		defer close(served)
		run(t, ctx, "--nats-url", n.URL(), "--redis-url", r.URL(), "serve", "--config", cfgPath)
	}()
	t.Cleanup(func() { cancel(); <-served })
	js := n.JetStream(t)
	require.Eventually(t, func() bool {
		_, err := js.Consumer(context.Background(), "PERSONAQ_REQUESTS", wire.Durable("spender"))
		return err == nil
	}, 20*time.Second, 20*time.Millisecond, "serve provisions spender")

	wctx, wcancel := context.WithTimeout(context.Background(), time.Minute)
	defer wcancel()
	code, _, errOut := run(t, wctx, "--nats-url", n.URL(), "publish", "--persona", "spender", "--task", "t-usage", "--id", "u-1", "--wait")
	require.Equal(t, 3, code, "blocked: %s", errOut)
	require.Contains(t, errOut, "budget_exhausted")
	require.Contains(t, errOut, "attempt 1 failed (retryable), 500 tokens, $0.25, retrying in 100ms")

	code, out, errOut := run(t, wctx, "--nats-url", n.URL(), "--redis-url", r.URL(), "task", "show", "t-usage")
	require.Equal(t, 0, code, errOut)
	t.Log(out)
	for _, want := range []string{
		"TOKENS IN/OUT", "COST", "400/100", "$0.25",
		"usage: 800 input + 200 output = 1000 tokens, cost $0.5 over 2 attempt(s)",
		"result: quarantined (budget_exhausted)", "after 2 attempt(s), 1000 tokens (800 in, 200 out), cost $0.5",
	} {
		require.Contains(t, out, want)
	}

	code, out, errOut = run(t, wctx, "--nats-url", n.URL(), "--redis-url", r.URL(), "task", "show", "t-usage", "-o", "json")
	require.Equal(t, 0, code, errOut)
	type usage struct {
		InputTokens  int64   `json:"input_tokens"`
		OutputTokens int64   `json:"output_tokens"`
		CostUSD      float64 `json:"cost_usd"`
	}
	var got struct {
		Steps []struct {
			Usage    usage `json:"usage"`
			Attempts []struct {
				Usage usage `json:"usage"`
			} `json:"attempts"`
			Record struct {
				Reason string `json:"reason"`
				Usage  usage  `json:"usage"`
			} `json:"record"`
		} `json:"steps"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &got), out)
	require.Len(t, got.Steps, 1)
	s := got.Steps[0]
	require.Len(t, s.Attempts, 2)
	for _, a := range s.Attempts {
		require.Equal(t, usage{400, 100, 0.25}, a.Usage)
	}
	require.Equal(t, usage{800, 200, 0.5}, s.Usage)
	require.Equal(t, "budget_exhausted", s.Record.Reason)
	require.Equal(t, usage{800, 200, 0.5}, s.Record.Usage)

	code, out, _ = run(t, wctx, "--nats-url", n.URL(), "result", "u-1")
	require.Equal(t, 3, code)
	require.Contains(t, out, "usage 1000 tokens (800 in, 200 out)  cost $0.5")

	// A request's own budget tightens the policy's: 500 + 500 > 600 ends it
	// after one attempt.
	code, _, errOut = run(t, wctx, "--nats-url", n.URL(), "publish", "--persona", "spender", "--task", "t-usage-2", "--id", "u-2",
		"--max-tokens", "600", "--wait")
	require.Equal(t, 3, code, errOut)
	require.Contains(t, errOut, "budget_exhausted after 1 attempt(s)")

	// The quarantine record says the same.
	code, out, errOut = run(t, wctx, "--nats-url", n.URL(), "quarantine", "show", "1")
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "budget_exhausted")
	require.Contains(t, out, "usage        1000 tokens (800 in, 200 out)   cost $0.5")
	require.Contains(t, out, "tokens 400/100")
}

func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
