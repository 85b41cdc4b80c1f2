package cli_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/personaq/personaq/consumers/wire"
	"github.com/personaq/personaq/integration/testenv"
)

// A caller waiting through a ledger outage reads why its request does not
// start, and the step deadline that passes says the ledger was down.
func TestPublishWaitSaysTheLedgerIsUnavailable(t *testing.T) {
	t.Parallel()
	n := testenv.StartNATS(t)
	r := testenv.StartRedis(t)
	cfgPath := filepath.Join(t.TempDir(), "personaq.yaml")
	require.NoError(t, os.WriteFile(cfgPath, []byte("personas:\n  echo:\n    invoker: {type: demo, demo: echo}\n"), 0o600))
	// go-redis's pool keeps a dialer retrying a dead server every second;
	// it notices the client was closed at its next try.
	t.Cleanup(func() {
		require.Eventually(t, func() bool {
			buf := make([]byte, 1<<20)
			return !bytes.Contains(buf[:runtime.Stack(buf, true)], []byte("pool.(*ConnPool).tryDial"))
		}, 5*time.Second, 50*time.Millisecond, "go-redis's dialer stopped")
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		run(t, ctx, "--nats-url", n.URL(), "--redis-url", r.URL(), "serve", "--config", cfgPath)
	}()
	t.Cleanup(func() { cancel(); <-done })
	require.Eventually(t, func() bool {
		_, err := n.JetStream(t).Consumer(context.Background(), "PERSONAQ_REQUESTS", wire.Durable("echo"))
		return err == nil
	}, 20*time.Second, 20*time.Millisecond)

	r.Stop()
	wctx, wcancel := context.WithTimeout(context.Background(), time.Minute)
	defer wcancel()
	code, _, errOut := run(t, wctx, "--nats-url", n.URL(), "publish", "--persona", "echo", "--task", "t-down",
		"--id", "down-1", "--wait", "--timeout", "8s")
	require.Equal(t, 6, code, errOut)
	require.Contains(t, errOut, "waiting: attempt ledger unavailable")
	require.Contains(t, errOut, "attempt ledger (Redis) was unreachable")
}
