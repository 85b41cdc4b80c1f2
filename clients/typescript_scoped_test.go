package clients_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// tsScopedAPI is a `personaq api` serving named tokens with scopes: one
// with submit and read (no cancel), one named janitor with cancel only.
type tsScopedAPI struct{ url, submitToken, cancelToken string }

var tsServingLine = regexp.MustCompile(`personaq api: serving (https?://\S+)\s`)

// tsScopedConfig is the --config of the scoped API: its tokens come from
// the environment.
const tsScopedConfig = `personas:
  echo:
    invoker: {type: demo, demo: echo}
api:
  tokens:
    - {name: orchestrator, token_env: PERSONAQ_SUBMIT_TOKEN, scopes: [submit, read]}
    - {name: janitor, token_env: PERSONAQ_CANCEL_TOKEN, scopes: [cancel]}
`

// tsStartScopedAPI starts `personaq api --config` on dev's NATS, so the
// client's tests can meet a token without the cancel scope; it is stopped
// when the test ends.
func tsStartScopedAPI(ctx context.Context, t *testing.T, bin, natsURL string) tsScopedAPI {
	t.Helper()
	cfg := filepath.Join(t.TempDir(), "personaq.yaml")
	require.NoError(t, os.WriteFile(cfg, []byte(tsScopedConfig), 0o600))
	api := tsScopedAPI{submitToken: tsToken(t), cancelToken: tsToken(t)}
	ctx, cancel := context.WithCancel(ctx)
	cmd := exec.CommandContext(ctx, bin, "--nats-url", natsURL, "api", "--config", cfg, "--listen", "127.0.0.1:0")
	cmd.Env = append(os.Environ(), "PERSONAQ_API_TOKEN=", "PERSONAQ_SUBMIT_TOKEN="+api.submitToken,
		"PERSONAQ_CANCEL_TOKEN="+api.cancelToken)
	cmd.Cancel = func() error { return cmd.Process.Signal(os.Interrupt) }
	cmd.WaitDelay = 10 * time.Second
	logs := &tsLog{found: make(chan []string, 1), want: []*regexp.Regexp{tsServingLine}}
	cmd.Stdout, cmd.Stderr = logs, logs
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		cancel()
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("personaq api (scoped tokens) output:\n%s", logs.String())
		}
	})
	select {
	case urls := <-logs.found:
		api.url = urls[0]
		return api
	case <-time.After(60 * time.Second):
		require.FailNow(t, fmt.Sprintf("personaq api printed no \"serving\" line within 60s:\n%s", logs.String()))
	}
	return api
}
