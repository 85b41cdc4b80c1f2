//go:build unix

package handlers

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// personaq installs the W3C propagator at start (cmd/telemetry Setup).
func init() { otel.SetTextMapPropagator(propagation.TraceContext{}) }

// attemptContext is an attempt's context carrying a span context, the
// way the runtime hands it to a handler.
func attemptContext(t *testing.T) (context.Context, string) {
	t.Helper()
	tid, err := trace.TraceIDFromHex("4bf92f3577b34da6a3ce929d0e0e4736")
	require.NoError(t, err)
	sid, err := trace.SpanIDFromHex("00f067aa0ba902b7")
	require.NoError(t, err)
	sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled,
		TraceState: must(trace.ParseTraceState("vendor=x"))})
	return trace.ContextWithSpanContext(context.Background(), sc), "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

func TestHTTPInvokerSendsTraceparent(t *testing.T) {
	t.Parallel()
	got := make(chan http.Header, 2)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got <- r.Header.Clone()
		_, _ = w.Write([]byte(`{}`))
	}))
	t.Cleanup(srv.Close)
	inv, err := NewHTTP(HTTPConfig{URL: srv.URL})
	require.NoError(t, err)

	ctx, want := attemptContext(t)
	_, err = inv.Handle(ctx, testRequest())
	require.NoError(t, err)
	h := <-got
	require.Equal(t, want, h.Get("traceparent"))
	require.Equal(t, "vendor=x", h.Get("tracestate"))

	_, err = inv.Handle(context.Background(), testRequest())
	require.NoError(t, err)
	require.Empty(t, (<-got).Get("traceparent"), "no trace context, no header")
}

func TestCommandInvokerPassesTraceparentInTheEnvironment(t *testing.T) {
	// Not parallel: it sets personaq's own TRACEPARENT, which must not
	// reach an attempt that has no trace context.
	t.Setenv("TRACEPARENT", "00-11111111111111111111111111111111-2222222222222222-01")
	inv := shInvoker(t, `printf '"%s|%s"' "$TRACEPARENT" "$TRACESTATE"`, CommandConfig{})

	ctx, want := attemptContext(t)
	res, err := inv.Handle(ctx, testRequest())
	require.NoError(t, err)
	require.Equal(t, `"`+want+`|vendor=x"`, string(res.Output))

	res, err = inv.Handle(context.Background(), testRequest())
	require.NoError(t, err)
	require.Equal(t, `"|"`, string(res.Output), "an inherited TRACEPARENT is not the attempt's")
	require.True(t, strings.HasPrefix(os.Getenv("TRACEPARENT"), "00-1111"))
}
