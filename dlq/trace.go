package dlq

import (
	"context"

	"github.com/nats-io/nats.go"
	"go.opentelemetry.io/otel/trace"

	"github.com/personaq/personaq/consumers/tracing"
)

// replaySpan starts the send span of a replay and puts its trace context
// in msg's headers in place of the original's: the replay is a new trace,
// linked to the replayed request's span (the traceparent the original
// message carried, kept in the record).
func (i *Inspector) replaySpan(ctx context.Context, msg *nats.Msg, it *ReplayItem) (context.Context, trace.Span) {
	opts := []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindProducer), trace.WithNewRoot()}
	if l, ok := tracing.LinkTo(msg.Header.Get(tracing.HeaderTraceparent), tracing.LinkReplayOf); ok {
		opts = append(opts, trace.WithLinks(l))
	}
	ctx, span := tracing.Tracer(i.cfg.TracerProvider).Start(ctx, tracing.SpanName("send", msg.Subject), opts...)
	if span.IsRecording() {
		span.SetAttributes(tracing.SendAttributes(msg.Subject, it.MsgID)...)
		span.SetAttributes(tracing.ReplayOf.String(it.RecordID), tracing.ReplayCount.Int(it.ReplayCount),
			tracing.RequestID.String(it.NewRequestID))
	}
	tracing.Inject(ctx, msg.Header)
	return ctx, span
}
