package handlers

import (
	"context"
	"net/http"
	"strings"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
)

// injectTrace passes the attempt's trace context (the span of the delivery
// that runs it) to an HTTP persona: traceparent and tracestate headers,
// with the global propagator.
func injectTrace(ctx context.Context, h http.Header) {
	otel.GetTextMapPropagator().Inject(ctx, propagation.HeaderCarrier(h))
}

// traceEnv is the attempt's trace context for a command persona, as
// environment variables: the propagator's keys upper-cased (TRACEPARENT,
// TRACESTATE, BAGGAGE), the convention OpenTelemetry specifies for
// environment carriers. TRACEPARENT and TRACESTATE are always set (empty
// without a trace context), so a value inherited from personaq's own
// environment never poses as the attempt's.
func traceEnv(ctx context.Context) []string {
	c := propagation.MapCarrier{"traceparent": "", "tracestate": ""}
	otel.GetTextMapPropagator().Inject(ctx, c)
	env := make([]string, 0, len(c))
	for k, v := range c {
		env = append(env, strings.ToUpper(k)+"="+v)
	}
	return env
}
