package cli

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"

	"github.com/personaq/personaq/consumers/ratelog"
)

// redisLogger writes go-redis's own messages (dial failures, pool
// retries: several a second while Redis is down) through the process
// logger as structured warnings, each distinct message at most once per
// ratelog.DefaultInterval, with how many copies were held back.
type redisLogger struct {
	log   atomic.Pointer[zerolog.Logger]
	quiet *ratelog.Limiter
}

// redisLogs is the process's go-redis logger: go-redis keeps one for the
// whole process (redis.SetLogger, unsynchronised), so it is set once and
// the logger it writes to is swapped instead.
var (
	redisLogs     = newRedisLogger()
	redisLogsOnce sync.Once
)

// routeRedisLogs sends go-redis's messages to log.
func routeRedisLogs(log zerolog.Logger) {
	l := log.With().Str("component", "go-redis").Logger()
	redisLogs.log.Store(&l)
	redisLogsOnce.Do(func() { redis.SetLogger(redisLogs) })
}

func newRedisLogger() *redisLogger {
	l := &redisLogger{quiet: ratelog.New(0)}
	nop := zerolog.Nop()
	l.log.Store(&nop)
	return l
}

// Printf implements go-redis's internal.Logging.
func (l *redisLogger) Printf(_ context.Context, format string, v ...any) {
	// The format names the kind of message; its values (addresses,
	// counts, errors) vary, so it is the key that is rate-limited.
	ok, held := l.quiet.Allow(format)
	if !ok {
		return
	}
	l.log.Load().Warn().Int("held_back", held).Msg(strings.TrimSpace(fmt.Sprintf(format, v...)))
}
