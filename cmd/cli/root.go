package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"

	"github.com/spf13/cobra"

	"github.com/personaq/personaq/cmd/config"
)

// ExitError carries a specific exit code out of a command (e.g. a sweep
// that found failed sagas exits 1 without being a usage error).
type ExitError struct {
	Code int
	Err  error
}

func (e *ExitError) Error() string { return e.Err.Error() }
func (e *ExitError) Unwrap() error { return e.Err }

// Run executes the personaq command line and returns the process exit code.
func Run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	stopTracing, err := startTracing(ctx, stderr)
	if err != nil {
		fmt.Fprintln(stderr, "personaq:", err)
		return 1
	}
	defer stopTracing()
	// One lock for every line on stderr: decision logs, attempt lines and
	// go-redis's messages come from several goroutines.
	stderr = &lockedWriter{w: stderr}
	root := NewRoot(stdout, stderr)
	root.SetArgs(args)
	err = root.ExecuteContext(ctx)
	// Before the last line: a Redis client's pool may still be dialling,
	// and its messages must not be written beside it or after it.
	releaseRedisLogs(stderr)
	if err == nil {
		return 0
	}
	fmt.Fprintln(stderr, "personaq:", err)
	var ee *ExitError
	if errors.As(err, &ee) {
		return ee.Code
	}
	return 1
}

// globals are the flags every command shares.
type globals struct {
	natsURL   string
	redisURL  string
	logLevel  string
	logFormat string
	stdout    io.Writer
	stderr    io.Writer
}

// NewRoot builds the command tree writing to stdout and stderr.
func NewRoot(stdout, stderr io.Writer) *cobra.Command {
	g := &globals{stdout: stdout, stderr: stderr}
	root := &cobra.Command{
		Use:           "personaq",
		Short:         "Run AI-agent persona requests on NATS JetStream with explicit, bounded retries",
		SilenceUsage:  true,
		SilenceErrors: true,
		Version:       Version(),
		PersistentPreRunE: func(*cobra.Command, []string) error {
			_, err := g.logger()
			return err
		},
	}
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.SetVersionTemplate("personaq {{.Version}}\n")
	f := root.PersistentFlags()
	f.StringVar(&g.natsURL, "nats-url", envOr("NATS_URL", config.DefaultNATSURL), "NATS server URL(s), comma separated (env NATS_URL)")
	f.StringVar(&g.redisURL, "redis-url", os.Getenv("REDIS_URL"), "Redis URL for the attempt ledger (env REDIS_URL)")
	f.StringVar(&g.logLevel, "log-level", envOr("PERSONAQ_LOG_LEVEL", "info"), "log level: trace|debug|info|warn|error")
	f.StringVar(&g.logFormat, "log-format", envOr("PERSONAQ_LOG_FORMAT", "console"), "log format: json|console")
	for _, add := range commands {
		root.AddCommand(add(g))
	}
	return root
}

// commands lists the subcommand constructors; each file registers its own.
var commands []func(*globals) *cobra.Command

func register(c func(*globals) *cobra.Command) { commands = append(commands, c) }

func envOr(key, def string) string {
	if v, ok := os.LookupEnv(key); ok && v != "" {
		return v
	}
	return def
}

// lockedWriter serialises writes to w.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
