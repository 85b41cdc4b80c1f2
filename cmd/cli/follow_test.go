package cli_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/personaq/personaq/consumers"
	"github.com/personaq/personaq/integration/testenv"
)

// serveAgents serves each script as a command persona (a real process per
// attempt) and returns the NATS URL.
func serveAgents(t *testing.T, scripts map[string]string) string {
	t.Helper()
	n := testenv.StartNATS(t)
	r := testenv.StartRedis(t)
	dir := t.TempDir()
	yaml := "personas:\n"
	for name, script := range scripts {
		path := filepath.Join(dir, name+".sh")
		require.NoError(t, os.WriteFile(path, []byte(script), 0o700))
		yaml += "  " + name + ":\n    invoker: {type: command, path: " + path + "}\n    timeout: 20s\n    policy: {preset: persona, max_attempts: 1}\n"
	}
	cfgPath := filepath.Join(dir, "personaq.yaml")
	require.NoError(t, os.WriteFile(cfgPath, []byte(yaml), 0o600))
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan struct{})
	go func() {
		defer close(served)
		run(t, ctx, "--nats-url", n.URL(), "--redis-url", r.URL(), "serve", "--config", cfgPath)
	}()
	t.Cleanup(func() { cancel(); <-served })
	js := n.JetStream(t)
	for name := range scripts {
		require.Eventually(t, func() bool {
			_, err := js.Consumer(context.Background(), "PERSONAQ_REQUESTS", consumers.Durable(name))
			return err == nil
		}, 20*time.Second, 20*time.Millisecond, "serve provisions %s", name)
	}
	return n.URL()
}

const reviewerScript = `#!/bin/sh
cat >/dev/null
printf '%s\n' '{"personaq_output":"Reading the code.\n"}'
echo '{"personaq_output":"The change is sound."}'
echo '{"review":"sound"}'
`

const brokenScript = `#!/bin/sh
cat >/dev/null
echo '{"personaq_output":"Starting the review"}'
echo 'cannot read the repository' >&2
exit 1
`

// TestFollowPrintsLiveOutput: publish --wait --follow and result --follow
// print the live text on stdout, then the output as without --follow; the
// exit code says how the request ended, as always.
func TestFollowPrintsLiveOutput(t *testing.T) {
	t.Parallel()
	url := serveAgents(t, map[string]string{"reviewer": reviewerScript, "broken": brokenScript})
	ctx := context.Background()

	code, out, errOut := run(t, ctx, "--nats-url", url, "publish", "--persona", "reviewer", "--task", "t-follow", "--id", "f-1", "--wait", "--follow")
	require.Equal(t, 0, code, errOut)
	require.Equal(t, "Reading the code.\nThe change is sound.\n"+`{"review":"sound"}`+"\n", out)

	code, out, errOut = run(t, ctx, "--nats-url", url, "result", "f-1", "--follow")
	require.Equal(t, 0, code, errOut)
	require.Regexp(t, `^Reading the code.\nThe change is sound.\nrequest f-1  succeeded\n`, out)

	code, out, errOut = run(t, ctx, "--nats-url", url, "publish", "--persona", "broken", "--task", "t-follow", "--id", "f-2", "--wait", "--follow")
	require.Equal(t, 3, code, "blocked, as without --follow: %s", errOut)
	require.Equal(t, "Starting the review\n", out)

	code, _, errOut = run(t, ctx, "--nats-url", url, "publish", "--persona", "reviewer", "--task", "t-follow", "--follow")
	require.Equal(t, 1, code)
	require.Contains(t, errOut, "--follow: only with --wait")
}
