package cli_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// get returns the status and body of a GET, or 0 when nothing answers.
func get(url string) (int, string) {
	resp, err := http.Get(url)
	if err != nil {
		return 0, ""
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// background runs the command until the test ends.
func background(t *testing.T, args ...string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		run(t, ctx, args...)
	}()
	t.Cleanup(func() { cancel(); <-done })
}

func TestConsoleServesDevAndAnyDeployment(t *testing.T) {
	t.Parallel()
	nats, devConsole, console := "127.0.0.1:"+freePort(t), "127.0.0.1:"+freePort(t), "127.0.0.1:"+freePort(t)
	background(t, "dev", "--listen", nats, "--console", devConsole, "--per-persona", "0", "--data-dir", t.TempDir())
	require.Eventually(t, func() bool {
		code, body := get("http://" + devConsole + "/")
		return code == http.StatusOK && strings.Contains(body, `data-persona="validator"`)
	}, 20*time.Second, 50*time.Millisecond, "dev serves the console")

	url := "nats://" + nats
	code, _, errOut := run(t, context.Background(), "--nats-url", url, "publish", "--persona", "validator", "--task", "t-console", "--id", "c-1", "--wait")
	require.Equal(t, 0, code, errOut)
	background(t, "--nats-url", url, "console", "--listen", console, "--read-only")
	require.Eventually(t, func() bool {
		code, body := get("http://" + console + "/task?q=t-console")
		return code == http.StatusOK && strings.Contains(body, "validation") && strings.Contains(body, "o-succeeded")
	}, 20*time.Second, 50*time.Millisecond, "console finds dev's ledger through NATS, like task show")
	_, body := get("http://" + console + "/")
	require.Contains(t, body, "read-only")
	resp, err := http.Post("http://"+console+"/personas/validator/pause", "application/x-www-form-urlencoded", nil)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusForbidden, resp.StatusCode)
}
