package telemetry_test

import (
	"bytes"
	"context"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/personaq/personaq/cmd/telemetry"
	"github.com/personaq/personaq/consumers/tracing"
)

func env(vars map[string]string) func(string) string {
	return func(k string) string { return vars[k] }
}

// The tests of Setup change the global provider: none runs in parallel.

func TestSetupIsOffByDefault(t *testing.T) {
	for name, vars := range map[string]map[string]string{
		"Unset":    {},
		"None":     {"OTEL_TRACES_EXPORTER": "none"},
		"Disabled": {"OTEL_TRACES_EXPORTER": "console", "OTEL_SDK_DISABLED": "true"},
	} {
		t.Run(name, func(t *testing.T) {
			var out bytes.Buffer
			shutdown, err := telemetry.Setup(context.Background(), telemetry.SetupConfig{Getenv: env(vars), Console: &out})
			require.NoError(t, err)
			require.IsType(t, noop.TracerProvider{}, otel.GetTracerProvider())
			_, span := tracing.Tracer(nil).Start(context.Background(), "x")
			require.False(t, span.IsRecording())
			span.End()
			require.NoError(t, shutdown(context.Background()))
			require.Empty(t, out.String())
		})
	}
}

func TestSetupConsolePrintsSpans(t *testing.T) {
	var out bytes.Buffer
	t.Setenv("OTEL_SERVICE_NAME", "personaq-test")
	shutdown, err := telemetry.Setup(context.Background(), telemetry.SetupConfig{
		Getenv: env(map[string]string{"OTEL_TRACES_EXPORTER": "console"}), Console: &out})
	require.NoError(t, err)
	_, span := tracing.Tracer(nil).Start(context.Background(), "process personaq.requests.echo")
	require.True(t, span.IsRecording())
	span.End()
	require.NoError(t, shutdown(context.Background()))
	require.Contains(t, out.String(), `"Name":"process personaq.requests.echo"`)
	require.Contains(t, out.String(), `"personaq-test"`)
	// The propagator is W3C trace context.
	h := nats.Header{}
	ctx := trace.ContextWithSpanContext(context.Background(), span.SpanContext())
	tracing.Inject(ctx, h)
	require.Equal(t, "00-"+span.SpanContext().TraceID().String()+"-"+span.SpanContext().SpanID().String()+"-01", h.Get("traceparent"))
	otel.SetTracerProvider(noop.NewTracerProvider())
}

func TestSetupRefusesAnUnknownExporter(t *testing.T) {
	t.Setenv("OTEL_TRACES_EXPORTER", "zipkin-ish")
	_, err := telemetry.Setup(context.Background(), telemetry.SetupConfig{})
	require.ErrorContains(t, err, "OTEL_TRACES_EXPORTER=zipkin-ish")
}
