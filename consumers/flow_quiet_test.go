package consumers_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/personaq/personaq/consumers"
	"github.com/personaq/personaq/consumers/flow"
	"github.com/personaq/personaq/consumers/ledger"
	"github.com/personaq/personaq/handlers"
	"github.com/personaq/personaq/integration/testenv"
)

// TestFlowStoreWarningsAreRateLimited: while the circuit store is down,
// every persona's circuit watch fails twice a second; the replica writes
// "circuit state not read" once per persona for the whole outage, not a
// line per failure.
func TestFlowStoreWarningsAreRateLimited(t *testing.T) {
	t.Parallel()
	h := newHarness(t, false)
	var logs syncBuffer
	h.logTo = &logs
	rds := testenv.StartRedis(t)
	client := rds.Client(t)
	l, err := ledger.New(ledger.Config{Client: client})
	require.NoError(t, err)
	h.ledger = l
	circuits, err := flow.NewCircuits(client, "")
	require.NoError(t, err)
	noop := handlers.Func(func(context.Context, *handlers.Request) (handlers.Result, error) {
		return handlers.Result{Output: []byte(`"ok"`)}, nil
	})
	guarded := func(name string) consumers.Persona {
		p := persona(name, noop, fastPolicy(3))
		p.Circuit = flow.Circuit{Failures: 3, MinCalls: 3, CoolDown: time.Second}
		return p
	}
	h.startMod(func(c *consumers.Config) { c.Circuits = circuits }, guarded("reviewer"), guarded("planner"))
	time.Sleep(700 * time.Millisecond) // the watches read the circuits once with the store up

	rds.Stop()
	const outage = 8 * time.Second // a failing read takes up to ledgerTimeout (3 s): 3+ per persona
	time.Sleep(outage)
	lines := 0
	for line := range strings.Lines(logs.String()) {
		if strings.Contains(line, "circuit state not read") {
			lines++
		}
	}
	require.Positive(t, lines, "the outage is reported")
	require.LessOrEqual(t, lines, 2, "one line per persona for the outage, not one per failed read:\n%s", logs.String())
}
