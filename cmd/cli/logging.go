package cli

import (
	"fmt"
	"io"
	"os"
	"time"

	"github.com/rs/zerolog"
)

// logger builds the process logger from --log-level and --log-format. It is
// the only place logging is configured; everything else receives it.
func (g *globals) logger() (zerolog.Logger, error) {
	level, err := zerolog.ParseLevel(g.logLevel)
	if err != nil || g.logLevel == "" {
		return zerolog.Nop(), fmt.Errorf("invalid flag --log-level: %q (want trace|debug|info|warn|error)", g.logLevel)
	}
	// Handlers log from many goroutines; SyncWriter keeps lines whole on any writer.
	out := zerolog.SyncWriter(g.stderr)
	var log zerolog.Logger
	switch g.logFormat {
	case "json":
		log = zerolog.New(out).Level(level).With().Timestamp().Logger()
	case "console":
		w := zerolog.ConsoleWriter{Out: out, TimeFormat: time.TimeOnly, NoColor: !isTerminal(g.stderr)}
		log = zerolog.New(w).Level(level).With().Timestamp().Logger()
	default:
		return zerolog.Nop(), fmt.Errorf("invalid flag --log-format: %q (want json|console)", g.logFormat)
	}
	routeRedisLogs(log, g.stderr)
	return log, nil
}

// isTerminal reports whether w is a terminal (colour codes are written
// only to one: a file or a pipe gets plain text).
func isTerminal(w io.Writer) bool {
	if l, ok := w.(*lockedWriter); ok {
		w = l.w
	}
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	info, err := f.Stat()
	return err == nil && info.Mode()&os.ModeCharDevice != 0
}
