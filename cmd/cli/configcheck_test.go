package cli_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// `config check` and `serve` refuse a command persona that could never
// run, and a malformed HTTP URL, naming the field, before any request
// reaches them (serve fails before it connects anywhere).
func TestConfigCheckAndServeRefuseInvokersThatCannotRun(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "personaq.yaml")
	missing := filepath.Join(dir, "agent-that-is-not-there")
	yaml := "personas:\n  builder:\n    invoker: {type: command, path: " + missing + "}\n"
	require.NoError(t, os.WriteFile(path, []byte(yaml), 0o600))
	for name, args := range map[string][]string{
		"ConfigCheck": {"config", "check", path},
		"Serve":       {"--nats-url", "nats://127.0.0.1:1", "serve", "--config", path},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			code, _, errOut := run(t, context.Background(), args...)
			require.NotZero(t, code)
			require.Contains(t, errOut, `personas.builder.invoker.path: command "`+missing+`" does not exist`)
		})
	}

	badURL := filepath.Join(dir, "url.yaml")
	require.NoError(t, os.WriteFile(badURL, []byte("personas:\n  planner:\n    invoker: {type: http, url: \"http//127.0.0.1:8081/planner\"}\n"), 0o600))
	code, _, errOut := run(t, context.Background(), "config", "check", badURL)
	require.NotZero(t, code)
	require.Contains(t, errOut, "personas.planner.invoker.url: want an absolute http(s) URL")
}
