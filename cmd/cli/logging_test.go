package cli

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"

	"github.com/personaq/personaq/consumers/ratelog"
	"github.com/personaq/personaq/schemas"
)

// Console-format logs written to a file or a pipe carry no ANSI colour
// codes (they are for a terminal).
func TestConsoleLogsWithoutColourWhenNotATerminal(t *testing.T) {
	t.Parallel()
	f, err := os.Create(filepath.Join(t.TempDir(), "log"))
	require.NoError(t, err)
	defer f.Close()
	g := &globals{stderr: f, logLevel: "info", logFormat: "console"}
	log, err := g.logger()
	require.NoError(t, err)
	log.Warn().Str("persona", "planner").Msg("plain text")
	raw, err := os.ReadFile(f.Name())
	require.NoError(t, err)
	require.Contains(t, string(raw), "plain text")
	require.NotContains(t, string(raw), "\x1b[", "no ANSI escape codes in a file")

	var buf bytes.Buffer
	g = &globals{stderr: &buf, logLevel: "info", logFormat: "console"}
	log, err = g.logger()
	require.NoError(t, err)
	log.Info().Msg("to a buffer")
	require.NotContains(t, buf.String(), "\x1b[")
}

// go-redis's own messages (a dial failure several times a second during an
// outage) come out as structured warnings, one per kind of message per
// interval, saying how many were held back.
func TestRedisLogsAreStructuredAndRateLimited(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	l := &redisLogger{log: zerolog.New(&buf), quiet: ratelog.New(0)}
	for i := range 20 {
		l.Printf(context.Background(), "redis: %s pool.go:770: failed to dial after %d attempts: %v\n", "2026/11/26", 5, i)
	}
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	require.Len(t, lines, 1, "one line for twenty copies")
	require.Contains(t, lines[0], `"level":"warn"`)
	require.Contains(t, lines[0], `failed to dial after 5 attempts: 0"`)
}

// Once a run returns, go-redis's messages no longer go to its stderr: a
// client's pool may still dial after the run, and its stderr is the
// caller's again (several runs share one process in tests and embedders).
func TestRedisLogsStopWithTheirRun(t *testing.T) {
	var mine, other bytes.Buffer
	// Formats unique to this run: the rate limit is keyed by format.
	format := func(what string) string { return fmt.Sprintf("redis: %s %d %%d\n", what, time.Now().UnixNano()) }
	routeRedisLogs(zerolog.New(&mine), &mine)
	redisLogs.Printf(context.Background(), format("stop-with-run test"), 1)
	require.Contains(t, mine.String(), "stop-with-run test")
	releaseRedisLogs(&other) // another run's end changes nothing
	redisLogs.Printf(context.Background(), format("stop-with-run other"), 2)
	require.Contains(t, mine.String(), "stop-with-run other")
	releaseRedisLogs(&mine)
	n := mine.Len()
	redisLogs.Printf(context.Background(), format("stop-with-run after"), 3)
	require.Equal(t, n, mine.Len(), "nothing written after the run returned")
}

// A caller following a request held through a ledger outage reads why.
func TestPrintAttemptSaysTheLedgerIsUnavailable(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	printAttempt(&buf, &schemas.AttemptEvent{Kind: schemas.AttemptWaiting, WaitingFor: schemas.WaitingForLedger, Error: "dial tcp: connection refused"})
	require.Equal(t, "waiting: attempt ledger unavailable (dial tcp: connection refused); the request starts when it is back, no attempt counted\n", buf.String())
}
