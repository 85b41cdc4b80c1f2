// Package telemetry sets up OpenTelemetry for the personaq binary: the
// global propagator and a tracer provider from the standard OTEL_*
// environment. It is here, beside the binary, so that the library
// (consumers, consumers/client) needs the OpenTelemetry API only, not the
// SDK, its exporters and gRPC.
package telemetry

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"go.opentelemetry.io/contrib/exporters/autoexport"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/exporters/stdout/stdouttrace"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace/noop"
)

// DefaultServiceName is service.name unless OTEL_SERVICE_NAME or
// OTEL_RESOURCE_ATTRIBUTES says otherwise.
const DefaultServiceName = "personaq"

// SetupConfig configures Setup.
type SetupConfig struct {
	// Getenv reads the environment. Default: os.Getenv.
	Getenv func(string) string
	// Console is where OTEL_TRACES_EXPORTER=console writes spans (so a
	// command's own output on stdout stays clean). Default: os.Stderr.
	Console io.Writer
}

// Setup installs the global propagator (W3C trace context and baggage)
// and a tracer provider configured by the standard OTEL_* variables:
//
//   - OTEL_SDK_DISABLED=true, or OTEL_TRACES_EXPORTER unset or "none":
//     tracing is off (a no-op provider: spans cost next to nothing; a
//     trace context that arrives in a message is still passed on).
//   - OTEL_TRACES_EXPORTER=console: spans as JSON on cfg.Console.
//   - OTEL_TRACES_EXPORTER=otlp: OTLP to a collector, configured by
//     OTEL_EXPORTER_OTLP_* (protocol http/protobuf unless
//     OTEL_EXPORTER_OTLP_PROTOCOL=grpc).
//
// Sampling follows OTEL_TRACES_SAMPLER(_ARG), batching OTEL_BSP_*, the
// resource OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES. shutdown
// flushes the spans not exported yet.
func Setup(ctx context.Context, cfg SetupConfig) (shutdown func(context.Context) error, err error) {
	if cfg.Getenv == nil {
		cfg.Getenv = os.Getenv
	}
	if cfg.Console == nil {
		cfg.Console = os.Stderr
	}
	otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}))
	nothing := func(context.Context) error { return nil }
	exporter := strings.TrimSpace(cfg.Getenv("OTEL_TRACES_EXPORTER"))
	if strings.EqualFold(strings.TrimSpace(cfg.Getenv("OTEL_SDK_DISABLED")), "true") || exporter == "" || exporter == "none" {
		otel.SetTracerProvider(noop.NewTracerProvider())
		return nothing, nil
	}
	exp, err := newExporter(ctx, exporter, cfg.Console)
	if err != nil {
		return nil, fmt.Errorf("tracing: OTEL_TRACES_EXPORTER=%s: %w", exporter, err)
	}
	res, err := resource.Merge(
		resource.NewSchemaless(semconv.ServiceName(DefaultServiceName)),
		resource.Environment(),
	)
	if err != nil {
		return nil, fmt.Errorf("tracing: resource: %w", err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	otel.SetTracerProvider(tp)
	return tp.Shutdown, nil
}

// newExporter builds the span exporter OTEL_TRACES_EXPORTER names: the
// contrib autoexport package for everything but console, which writes to
// w instead of stdout.
func newExporter(ctx context.Context, name string, w io.Writer) (sdktrace.SpanExporter, error) {
	if strings.Contains(name, ",") {
		return nil, errors.New("one exporter only")
	}
	if name == "console" {
		return stdouttrace.New(stdouttrace.WithWriter(w))
	}
	return autoexport.NewSpanExporter(ctx)
}
