package cli

import (
	"context"
	"io"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/personaq/personaq/cmd/telemetry"
	"github.com/personaq/personaq/consumers/tracing"
	"github.com/personaq/personaq/consumers/wire"
	"github.com/personaq/personaq/schemas"
)

// startTracing configures OpenTelemetry from the OTEL_* environment (off
// unless OTEL_TRACES_EXPORTER names an exporter; console spans go to
// stderr, keeping stdout for the command's output). stop flushes the spans
// not exported yet, waiting at most 5s.
func startTracing(ctx context.Context, stderr io.Writer) (stop func(), err error) {
	shutdown, err := telemetry.Setup(ctx, telemetry.SetupConfig{Console: stderr})
	if err != nil {
		return nil, err
	}
	return func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = shutdown(sctx)
	}, nil
}

// publishTraced publishes req under a send span of the global tracer, so
// the demo workload's requests are traced from their submit like a
// client's.
func publishTraced(ctx context.Context, js jetstream.JetStream, req *schemas.PersonaRequest) error {
	topo := wire.Topology{}.WithDefaults()
	ctx, span := tracing.StartSend(ctx, tracing.Tracer(nil), topo.RequestSubject(req.Persona), req.RequestID,
		tracing.Persona.String(req.Persona), tracing.TaskID.String(req.TaskID), tracing.Step.String(req.Step))
	ack, err := wire.PublishRequest(ctx, js, topo, req)
	if err != nil {
		tracing.EndSend(span, tracing.Sent{}, err)
		return err
	}
	tracing.EndSend(span, tracing.Sent{Stream: ack.Stream, Sequence: ack.Sequence, Duplicate: ack.Duplicate}, nil)
	return nil
}
