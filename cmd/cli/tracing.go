package cli

import (
	"context"
	"io"
	"time"

	"github.com/personaq/personaq/consumers/tracing"
)

// startTracing configures OpenTelemetry from the OTEL_* environment (off
// unless OTEL_TRACES_EXPORTER names an exporter; console spans go to
// stderr, keeping stdout for the command's output). stop flushes the spans
// not exported yet, waiting at most 5s.
func startTracing(ctx context.Context, stderr io.Writer) (stop func(), err error) {
	shutdown, err := tracing.Setup(ctx, tracing.SetupConfig{Console: stderr})
	if err != nil {
		return nil, err
	}
	return func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = shutdown(sctx)
	}, nil
}
