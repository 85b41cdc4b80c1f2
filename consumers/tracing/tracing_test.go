package tracing_test

import (
	"context"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/personaq/personaq/consumers/tracing"
)

func TestHeadersCarryTheTraceContext(t *testing.T) {
	otel.SetTextMapPropagator(propagation.TraceContext{})
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	ctx, span := tracing.Tracer(tp).Start(context.Background(), "send")
	defer span.End()

	h := nats.Header{"traceparent": {"00-11111111111111111111111111111111-2222222222222222-01"}, "tracestate": {"stale=1"}}
	tracing.Inject(ctx, h)
	require.Equal(t, []string{tracing.Traceparent(ctx)}, h.Values("traceparent"), "a copied context is replaced")
	require.Empty(t, h.Values("tracestate"))
	got := trace.SpanContextFromContext(tracing.Extract(context.Background(), h))
	require.True(t, got.IsRemote())
	require.Equal(t, span.SpanContext().SpanID(), got.SpanID())
	got = trace.SpanContextFromContext(tracing.ExtractMap(context.Background(), map[string]string{"traceparent": h.Get("traceparent")}))
	require.Equal(t, span.SpanContext().TraceID(), got.TraceID())

	// Only a recorded span is worth a link later.
	require.Empty(t, tracing.Traceparent(trace.ContextWithSpanContext(context.Background(), got)))
	l, ok := tracing.LinkTo(tracing.Traceparent(ctx), tracing.LinkPreviousAttempt)
	require.True(t, ok)
	require.Equal(t, span.SpanContext().SpanID(), l.SpanContext.SpanID())
	_, ok = tracing.LinkTo("not a traceparent", tracing.LinkPreviousAttempt)
	require.False(t, ok)
}

func TestUsageAttributes(t *testing.T) {
	require.Empty(t, tracing.UsageAttributes(0, 0), "no usage reported, no attributes")
	a := tracing.UsageAttributes(1200, 350)
	require.Equal(t, []string{"gen_ai.usage.input_tokens", "gen_ai.usage.output_tokens"}, []string{string(a[0].Key), string(a[1].Key)})
	require.Equal(t, int64(1200), a[0].Value.AsInt64())
	require.Equal(t, int64(350), a[1].Value.AsInt64())
}
