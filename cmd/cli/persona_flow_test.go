package cli_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/personaq/personaq/consumers"
	"github.com/personaq/personaq/consumers/flow"
	"github.com/personaq/personaq/integration/testenv"
	"github.com/personaq/personaq/retry"
)

// TestPersonaLsShowsLimiterAndCircuit: `persona ls` names each persona's
// limiter and shows its circuit as the shared store has it.
func TestPersonaLsShowsLimiterAndCircuit(t *testing.T) {
	t.Parallel()
	n := testenv.StartNATS(t)
	js := n.JetStream(t)
	r := testenv.StartRedis(t)
	client := r.Client(t)
	lim, err := flow.NewLimiter(flow.LimiterConfig{Client: client, Limits: map[string]flow.Limit{"openai-gpt5": {RequestsPerMinute: 500}}})
	require.NoError(t, err)
	circuits, err := flow.NewCircuits(client, "")
	require.NoError(t, err)
	h := &handled{tasks: map[string]bool{}}
	pol := retry.Policy{Name: "test", MaxAttempts: 2, AttemptTimeout: 2 * time.Second, Schedule: retry.Linear{Step: 50 * time.Millisecond}}
	rt, err := consumers.New(consumers.Config{
		WithoutLedger: true, JetStream: js, Limiter: lim, Circuits: circuits,
		Personas: []consumers.Persona{
			{Name: "planner", Handler: h.handler(), Policy: pol, Limiter: "openai-gpt5", Circuit: flow.Circuit{Failures: 5}},
			{Name: "echo", Handler: h.handler(), Policy: pol},
		},
	})
	require.NoError(t, err)
	require.NoError(t, rt.Provision(context.Background()))
	_, _, err = circuits.Open(context.Background(), "planner", time.Hour, 5)
	require.NoError(t, err)

	code, out, errOut := run(t, context.Background(), "--nats-url", n.URL(), "persona", "ls")
	require.Equal(t, 0, code, errOut)
	require.Contains(t, collapse(out), "PERSONA PENDING IN FLIGHT REDELIVERED PAUSED PULLS LIMITER CIRCUIT")
	require.Contains(t, collapse(out), "echo 0 0 0 no 0 - off")
	require.Contains(t, collapse(out), "planner 0 0 0 no 0 openai-gpt5 on", "no Redis named: the state is unknown")

	code, out, errOut = run(t, context.Background(), "--nats-url", n.URL(), "--redis-url", "redis://"+r.Addr, "persona", "ls")
	require.Equal(t, 0, code, errOut)
	require.Contains(t, collapse(out), "planner 0 0 0 no 0 openai-gpt5 open until ")
	require.Contains(t, out, "(5 failures)")
}
