package clients_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestTypeScriptClient compiles clients/typescript with Debian's tsc, starts
// `personaq dev` (its console listener serves the API) and runs the
// client's node:test suite against it: every outcome, the API errors,
// long-polls, event streams, aborts and reconnects. Without tsc or node the
// test is skipped, or fails when CI is set.
func TestTypeScriptClient(t *testing.T) {
	t.Parallel()
	tsc, node := tsTool(t, "tsc", "node-typescript"), tsTool(t, "node", "nodejs")
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()

	tsRun(t, exec.CommandContext(ctx, tsc, "-p", "typescript"))
	token := tsToken(t)
	bin := buildPersonaq(t)
	dev := tsStartDev(ctx, t, bin, token)
	scoped := tsStartScopedAPI(ctx, t, bin, dev.natsURL)
	gates := startStreamReplica(ctx, t, bin, dev.natsURL, dev.apiURL, token)

	tests, err := filepath.Glob(filepath.Join("typescript", "dist", "test", "*.test.js"))
	require.NoError(t, err)
	require.NotEmpty(t, tests, "tsc wrote no compiled tests")
	cmd := exec.CommandContext(ctx, node, append([]string{"--test"}, tests...)...)
	cmd.Env = append(os.Environ(), "PERSONAQ_URL="+dev.apiURL, "PERSONAQ_API_TOKEN="+token,
		"PERSONAQ_SCOPED_URL="+scoped.url, "PERSONAQ_SUBMIT_TOKEN="+scoped.submitToken, "PERSONAQ_CANCEL_TOKEN="+scoped.cancelToken, "PERSONAQ_STREAM_GATES="+gates)
	out := tsRun(t, cmd)
	t.Logf("node --test: %s", tsSummary(out))
}

// tsTool finds a binary, or skips the test (fails it when CI is set).
func tsTool(t *testing.T, name, pkg string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err == nil {
		return p
	}
	if os.Getenv("CI") != "" {
		t.Fatalf("no %s on PATH (apt-get install %s); CI is set, so this is a failure, not a skip", name, pkg)
	}
	t.Skipf("no %s on PATH: TypeScript client tests skipped (apt-get install %s)", name, pkg)
	return ""
}

// tsRun runs cmd and fails the test with its output when it fails.
func tsRun(t *testing.T, cmd *exec.Cmd) []byte {
	t.Helper()
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s failed:\n%s", strings.Join(cmd.Args, " "), out)
	return out
}

// tsSummary keeps node --test's closing counts ("# pass 40" …).
func tsSummary(out []byte) string {
	var keep []string
	for _, l := range strings.Split(string(out), "\n") {
		if strings.HasPrefix(l, "# ") && !strings.HasPrefix(l, "# Subtest") {
			keep = append(keep, strings.TrimPrefix(l, "# "))
		}
	}
	return strings.Join(keep, ", ")
}

func tsToken(t *testing.T) string {
	t.Helper()
	b := make([]byte, 16)
	_, err := rand.Read(b)
	require.NoError(t, err)
	return hex.EncodeToString(b)
}

var (
	tsAPILine  = regexp.MustCompile(`API at (https?://\S+)\s`)
	tsNATSLine = regexp.MustCompile(`NATS at (nats://\S+)\s`)
)

// tsDev is a running `personaq dev`: its API and NATS URLs.
type tsDev struct{ apiURL, natsURL string }

// tsStartDev starts `personaq dev` with the token and returns the API and
// NATS URLs it prints; the process is stopped when the test ends.
func tsStartDev(ctx context.Context, t *testing.T, bin, token string) tsDev {
	t.Helper()
	ctx, cancel := context.WithCancel(ctx)
	cmd := exec.CommandContext(ctx, bin, "dev", "--per-persona", "0", "--time-scale", "0.01",
		"--console", "127.0.0.1:0", "--data-dir", t.TempDir())
	cmd.Env = append(os.Environ(), "PERSONAQ_API_TOKEN="+token)
	cmd.Cancel = func() error { return cmd.Process.Signal(os.Interrupt) }
	cmd.WaitDelay = 10 * time.Second
	logs := &tsLog{found: make(chan []string, 1), want: []*regexp.Regexp{tsAPILine, tsNATSLine}}
	cmd.Stdout, cmd.Stderr = logs, logs
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		cancel()
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("personaq dev output:\n%s", logs.String())
		}
	})
	select {
	case urls := <-logs.found:
		return tsDev{apiURL: urls[0], natsURL: urls[1]}
	case <-time.After(60 * time.Second):
		t.Fatalf("personaq dev printed no \"API at\" and \"NATS at\" lines within 60s:\n%s", logs.String())
	}
	return tsDev{}
}

// tsLog is a process's output, kept for a failure's message; found gets
// the first submatch of every want once complete lines match them all.
type tsLog struct {
	mu    sync.Mutex
	buf   bytes.Buffer
	want  []*regexp.Regexp
	found chan []string
	seen  bool
}

func (l *tsLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	n, err := l.buf.Write(p)
	if l.seen {
		return n, err
	}
	var got []string
	for _, re := range l.want {
		m := re.FindSubmatch(l.buf.Bytes())
		if m == nil {
			return n, err
		}
		got = append(got, string(m[1]))
	}
	l.seen = true
	l.found <- got
	return n, err
}

func (l *tsLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}
