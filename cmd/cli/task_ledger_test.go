package cli_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/personaq/personaq/consumers/wire"
	"github.com/personaq/personaq/integration/testenv"
)

// One ledger, said out loud: `task show` names the ledger it reads and,
// when that ledger knows nothing of a task that ran (its replicas wrote
// another one), shows the task's terminal records from NATS instead of
// "no ledger entries".
func TestTaskShowNamesItsLedgerAndFallsBackOnTerminalRecords(t *testing.T) {
	t.Parallel()
	n := testenv.StartNATS(t)
	served, other := testenv.StartRedis(t), testenv.StartRedis(t)
	cfgPath := filepath.Join(t.TempDir(), "personaq.yaml")
	require.NoError(t, os.WriteFile(cfgPath, []byte("personas:\n  echo:\n    invoker: {type: demo, demo: echo}\n"), 0o600))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		run(t, ctx, "--nats-url", n.URL(), "--redis-url", served.URL(), "serve", "--config", cfgPath)
	}()
	t.Cleanup(func() { cancel(); <-done })
	require.Eventually(t, func() bool {
		_, err := n.JetStream(t).Consumer(context.Background(), "PERSONAQ_REQUESTS", wire.Durable("echo"))
		return err == nil
	}, 20*time.Second, 20*time.Millisecond)
	wctx, wcancel := context.WithTimeout(context.Background(), time.Minute)
	defer wcancel()
	code, _, errOut := run(t, wctx, "--nats-url", n.URL(), "publish", "--persona", "echo", "--task", "story-7", "--id", "e-1", "--wait")
	require.Equal(t, 0, code, errOut)

	code, out, errOut := run(t, wctx, "--nats-url", n.URL(), "--redis-url", served.URL(), "task", "show", "story-7")
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "ledger: redis "+served.Addr+" db 0, key prefix personaq (from --redis-url / REDIS_URL)")
	require.Contains(t, out, "ATTEMPT")

	code, out, errOut = run(t, wctx, "--nats-url", n.URL(), "--redis-url", other.URL(), "task", "show", "story-7")
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "ledger: redis "+other.Addr+" db 0")
	require.Contains(t, out, "task story-7 step main request e-1: ran; attempts recorded in another ledger")
	require.Contains(t, out, "result: succeeded after 1 attempt(s)")

	code, _, errOut = run(t, wctx, "--nats-url", n.URL(), "--redis-url", other.URL(), "task", "show", "story-404")
	require.Equal(t, 1, code)
	require.Contains(t, errOut, "no ledger entries for task \"story-404\" in redis "+other.Addr)
	require.Contains(t, errOut, "no terminal record in NATS")
}
