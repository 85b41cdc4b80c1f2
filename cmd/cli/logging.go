package cli

import (
	"fmt"
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
	switch g.logFormat {
	case "json":
		return zerolog.New(out).Level(level).With().Timestamp().Logger(), nil
	case "console":
		w := zerolog.ConsoleWriter{Out: out, TimeFormat: time.TimeOnly}
		return zerolog.New(w).Level(level).With().Timestamp().Logger(), nil
	}
	return zerolog.Nop(), fmt.Errorf("invalid flag --log-format: %q (want json|console)", g.logFormat)
}
