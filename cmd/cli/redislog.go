package cli

import (
	"context"
	"fmt"
	"io"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"

	"github.com/personaq/personaq/consumers/ratelog"
)

// redisLogger writes go-redis's own messages (dial failures, pool
// retries: several a second while Redis is down) through the process
// logger as structured warnings, each distinct message at most once per
// ratelog.DefaultInterval, with how many copies were held back.
type redisLogger struct {
	// mu is held (read) while a message is written, so that release,
	// which takes it to write, leaves no write under way to a logger
	// whose run has returned.
	mu    sync.RWMutex
	log   zerolog.Logger
	owner io.Writer // the stderr of the run whose logger it is
	quiet *ratelog.Limiter
}

// redisLogs is the process's go-redis logger: go-redis keeps one for the
// whole process (redis.SetLogger, unsynchronised), so it is set once and
// the logger it writes to is swapped instead.
var (
	redisLogs     = &redisLogger{log: zerolog.Nop(), quiet: ratelog.New(0)}
	redisLogsOnce sync.Once
)

// routeRedisLogs sends go-redis's messages to log, which writes to stderr.
func routeRedisLogs(log zerolog.Logger, stderr io.Writer) {
	l := log.With().Str("component", "go-redis").Logger()
	redisLogs.mu.Lock()
	redisLogs.log, redisLogs.owner = l, stderr
	redisLogs.mu.Unlock()
	redisLogsOnce.Do(func() { redis.SetLogger(redisLogs) })
}

// releaseRedisLogs stops go-redis's messages going to stderr once the run
// that owns it returns (several runs share one process in tests and
// embedders; a client's pool may still dial after its run).
func releaseRedisLogs(stderr io.Writer) {
	redisLogs.mu.Lock()
	defer redisLogs.mu.Unlock()
	if redisLogs.owner == stderr {
		redisLogs.log, redisLogs.owner = zerolog.Nop(), nil
	}
}

// Printf implements go-redis's internal.Logging.
func (l *redisLogger) Printf(_ context.Context, format string, v ...any) {
	// The format names the kind of message; its values (addresses,
	// counts, errors) vary, so it is the key that is rate-limited.
	ok, held := l.quiet.Allow(format)
	if !ok {
		return
	}
	l.mu.RLock()
	defer l.mu.RUnlock()
	l.log.Warn().Int("held_back", held).Msg(strings.TrimSpace(fmt.Sprintf(format, v...)))
}
