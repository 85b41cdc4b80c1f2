package cli_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestCancelCommandExitCodes(t *testing.T) {
	t.Parallel()
	url, _ := serveDemo(t, "slowpoke")
	ctx := context.Background()

	waited := make(chan int, 1)
	var waitErr string
	go func() {
		code, _, errOut := run(t, ctx, "--nats-url", url, "publish", "--persona", "slowpoke", "--task", "t-cancel", "--id", "c-1", "--wait")
		waitErr = errOut
		waited <- code
	}()
	var code int
	var out, errOut string
	require.Eventually(t, func() bool {
		code, out, errOut = run(t, ctx, "--nats-url", url, "cancel", "c-1", "--reason", "workflow cancelled")
		return code != 9 // published yet?
	}, 10*time.Second, 50*time.Millisecond)
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "request c-1  cancelled")
	select {
	case code = <-waited:
	case <-time.After(10 * time.Second):
		t.Fatal("publish --wait did not return")
	}
	require.Equal(t, 7, code, "publish --wait exits 7 when cancelled: %s", waitErr)
	code, out, _ = run(t, ctx, "--nats-url", url, "result", "c-1")
	require.Equal(t, 7, code)
	require.Contains(t, out, "cancelled by cli")
	require.Contains(t, out, "detail workflow cancelled")

	code, out, _ = run(t, ctx, "--nats-url", url, "cancel", "c-1")
	require.Equal(t, 8, code, "already ended")
	require.Contains(t, out, "already ended: cancelled")
	code, _, _ = run(t, ctx, "--nats-url", url, "cancel", "no-such-request")
	require.Equal(t, 9, code)

	for _, id := range []string{"t1", "t2"} {
		code, _, errOut = run(t, ctx, "--nats-url", url, "publish", "--persona", "slowpoke", "--task", "t-whole", "--id", id)
		require.Equal(t, 0, code, errOut)
	}
	code, out, errOut = run(t, ctx, "--nats-url", url, "cancel", "--task", "t-whole", "--reason", "superseded")
	require.Equal(t, 0, code, errOut)
	require.Equal(t, 2, strings.Count(out, "cancelled"), out)
	code, _, _ = run(t, ctx, "--nats-url", url, "cancel", "--task", "t-whole")
	require.Contains(t, []int{8, 9}, code, "nothing left to cancel")
	code, _, _ = run(t, ctx, "--nats-url", url, "cancel", "c-1", "--task", "t-whole")
	require.Equal(t, 1, code, "an id and --task together are refused")
}
