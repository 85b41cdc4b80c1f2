package client_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/personaq/personaq/consumers"
	"github.com/personaq/personaq/consumers/client"
	"github.com/personaq/personaq/consumers/tracing"
	"github.com/personaq/personaq/consumers/wire"
	"github.com/personaq/personaq/dlq"
	"github.com/personaq/personaq/handlers"
	"github.com/personaq/personaq/retry"
	"github.com/personaq/personaq/schemas"
)

// The binary installs the W3C propagator (cmd/telemetry Setup); so do the tests.
func init() { otel.SetTextMapPropagator(propagation.TraceContext{}) }

// tracedProcess is one process of a traced deployment (the orchestrator,
// a replica): its own tracer provider, named by service.instance.id, all
// recording into one recorder.
func tracedProcess(rec *tracetest.SpanRecorder, name string) *sdktrace.TracerProvider {
	res := resource.NewSchemaless(attribute.String("service.name", "personaq"), attribute.String("service.instance.id", name))
	return sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec), sdktrace.WithResource(res))
}

// persona records the traceparent header of every attempt it is sent
// and fails attempt 1 with a 503.
type tracedPersona struct {
	mu          sync.Mutex
	traceparent map[int]string
}

func (p *tracedPersona) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	n, _ := strconv.Atoi(r.Header.Get("X-Personaq-Attempt"))
	p.mu.Lock()
	p.traceparent[n] = r.Header.Get("traceparent")
	p.mu.Unlock()
	if n == 1 {
		http.Error(w, `{"error":"overloaded"}`, http.StatusServiceUnavailable)
		return
	}
	_, _ = fmt.Fprintf(w, `{"plan":"done on attempt %d","usage":{"input_tokens":1200,"output_tokens":350,"cost_usd":0.012}}`, n)
}

func (p *tracedPersona) header(n int) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.traceparent[n]
}

func attrs(s sdktrace.ReadOnlySpan) map[attribute.Key]attribute.Value {
	m := map[attribute.Key]attribute.Value{}
	for _, kv := range s.Attributes() {
		m[kv.Key] = kv.Value
	}
	return m
}

func instance(s sdktrace.ReadOnlySpan) string {
	v, _ := s.Resource().Set().Value("service.instance.id")
	return v.AsString()
}

// spans returns the ended spans named name that satisfy keep.
func spans(rec *tracetest.SpanRecorder, name string, keep func(sdktrace.ReadOnlySpan) bool) []sdktrace.ReadOnlySpan {
	var out []sdktrace.ReadOnlySpan
	for _, s := range rec.Ended() {
		if s.Name() == name && (keep == nil || keep(s)) {
			out = append(out, s)
		}
	}
	return out
}

func ofRequest(id string) func(sdktrace.ReadOnlySpan) bool {
	return func(s sdktrace.ReadOnlySpan) bool { return attrs(s)[tracing.RequestID].AsString() == id }
}

func childOf(parent sdktrace.ReadOnlySpan) func(sdktrace.ReadOnlySpan) bool {
	return func(s sdktrace.ReadOnlySpan) bool { return s.Parent().SpanID() == parent.SpanContext().SpanID() }
}

func traceparentOf(s sdktrace.ReadOnlySpan) string {
	sc := s.SpanContext()
	return "00-" + sc.TraceID().String() + "-" + sc.SpanID().String() + "-01"
}

// One trace from the orchestrator's submit through a failed attempt on one
// replica, its retry on another and success: every attempt is a child of
// the send span, the retry links to the failed attempt, each has a settle
// span, and the persona was sent each attempt's own trace context.
func TestTraceFromSubmitThroughRetryOnAnotherReplica(t *testing.T) {
	t.Parallel()
	e := newEnv(t, true)
	rec := tracetest.NewSpanRecorder()
	c, err := client.New(client.Config{JetStream: e.js, Logger: &e.log, TracerProvider: tracedProcess(rec, "orchestrator")})
	require.NoError(t, err)
	p := &tracedPersona{traceparent: map[int]string{}}
	srv := httptest.NewServer(p)
	t.Cleanup(srv.Close)
	inv, err := handlers.NewHTTP(handlers.HTTPConfig{URL: srv.URL})
	require.NoError(t, err)
	pol := retry.Policy{Name: "test", MaxAttempts: 3, AttemptTimeout: 5 * time.Second, Schedule: retry.Linear{Step: 300 * time.Millisecond}}
	planner := consumers.Persona{Name: "planner", Handler: inv, Policy: pol, Concurrency: 2}

	stopA := e.serve(consumers.Config{TracerProvider: tracedProcess(rec, "replica-a")}, planner)
	req := schemas.NewRequest("story-42", "plan", "planner")
	req.Agents = schemas.Agents{Primary: "agent-a", Fallback: "agent-b"}
	_, err = c.Submit(context.Background(), req)
	require.NoError(t, err)
	// Attempt 1 fails on replica A and is settled for a retry; A then
	// stops, so the retry runs on replica B.
	require.Eventually(t, func() bool {
		return len(spans(rec, "settle personaq.requests.planner", func(s sdktrace.ReadOnlySpan) bool {
			return attrs(s)[tracing.Disposition].AsString() == "retry"
		})) == 1
	}, 10*time.Second, 10*time.Millisecond)
	stopA()
	e.serve(consumers.Config{TracerProvider: tracedProcess(rec, "replica-b")}, planner)
	actx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	res, err := c.Await(actx, req.RequestID)
	require.NoError(t, err)
	require.JSONEq(t, `{"plan":"done on attempt 2","usage":{"input_tokens":1200,"output_tokens":350,"cost_usd":0.012}}`, string(res.Output))

	send := spans(rec, "send personaq.requests.planner", ofRequest(req.RequestID))
	require.Len(t, send, 1)
	require.Equal(t, trace.SpanKindProducer, send[0].SpanKind())
	require.Equal(t, "orchestrator", instance(send[0]))
	sa := attrs(send[0])
	require.Equal(t, "nats", sa["messaging.system"].AsString())
	require.Equal(t, "send", sa["messaging.operation.type"].AsString())
	require.Equal(t, req.RequestID, sa["messaging.message.id"].AsString())

	var attempts []sdktrace.ReadOnlySpan
	require.Eventually(t, func() bool {
		attempts = spans(rec, "process personaq.requests.planner", func(s sdktrace.ReadOnlySpan) bool {
			return attrs(s)[tracing.Attempt].AsInt64() > 0
		})
		return len(attempts) == 2
	}, 10*time.Second, 10*time.Millisecond)
	if attrs(attempts[0])[tracing.Attempt].AsInt64() == 2 {
		attempts[0], attempts[1] = attempts[1], attempts[0]
	}
	traceID := send[0].SpanContext().TraceID()
	for i, a := range attempts {
		n := i + 1
		at := attrs(a)
		require.Equal(t, traceID, a.SpanContext().TraceID(), "attempt %d is in the submit's trace", n)
		require.Equal(t, send[0].SpanContext().SpanID(), a.Parent().SpanID(), "attempt %d is a child of the send span", n)
		require.True(t, a.Parent().IsRemote())
		require.Equal(t, trace.SpanKindConsumer, a.SpanKind())
		require.Equal(t, "nats", at["messaging.system"].AsString())
		require.Equal(t, "process", at["messaging.operation.type"].AsString())
		require.Equal(t, "personaq.requests.planner", at["messaging.destination.name"].AsString())
		require.Equal(t, wire.Durable("planner"), at["messaging.consumer.group.name"].AsString())
		require.Equal(t, req.RequestID, at["messaging.message.id"].AsString())
		require.Equal(t, int64(n), at[tracing.MessagingNATSDeliveryCount].AsInt64())
		require.Equal(t, "planner", at[tracing.Persona].AsString())
		require.Equal(t, "story-42", at[tracing.TaskID].AsString())
		require.Equal(t, "plan", at[tracing.Step].AsString())
		require.Equal(t, int64(n), at[tracing.Attempt].AsInt64())
		require.Equal(t, traceparentOf(a), p.header(n), "the persona got attempt %d's own trace context", n)
		settle := spans(rec, "settle personaq.requests.planner", childOf(a))
		require.Len(t, settle, 1, "attempt %d has one settle span", n)
		require.Equal(t, a.SpanContext().TraceID(), settle[0].SpanContext().TraceID())
	}
	a1, a2 := attrs(attempts[0]), attrs(attempts[1])
	require.Equal(t, "replica-a", instance(attempts[0]))
	require.Equal(t, "replica-b", instance(attempts[1]))
	require.Equal(t, "agent-a", a1[tracing.Agent].AsString())
	require.Equal(t, "retryable", a1[tracing.Class].AsString())
	require.Equal(t, "retry", a1[tracing.Decision].AsString())
	require.InDelta(t, 0.3, a1[tracing.NextDelay].AsFloat64(), 0.001)
	require.Equal(t, "agent-b", a1[tracing.NextAgent].AsString())
	require.Equal(t, "retryable", a1["error.type"].AsString())
	require.Equal(t, codes.Error, attempts[0].Status().Code)
	require.Empty(t, attempts[0].Links())
	require.NotContains(t, a1, tracing.GenAIUsageInputTokens, "attempt 1 reported no usage")

	require.Equal(t, "agent-b", a2[tracing.Agent].AsString())
	require.Equal(t, "succeeded", a2[tracing.Class].AsString())
	require.Equal(t, "ack", a2[tracing.Decision].AsString())
	require.NotEqual(t, codes.Error, attempts[1].Status().Code)
	require.Equal(t, int64(1200), a2["gen_ai.usage.input_tokens"].AsInt64(), "the usage the persona reported")
	require.Equal(t, int64(350), a2["gen_ai.usage.output_tokens"].AsInt64())
	require.InDelta(t, 0.012, a2[tracing.CostUSD].AsFloat64(), 1e-9)
	require.Len(t, attempts[1].Links(), 1, "the retry links to the failed attempt")
	link := attempts[1].Links()[0]
	require.Equal(t, attempts[0].SpanContext().SpanID(), link.SpanContext.SpanID())
	require.Equal(t, traceID, link.SpanContext.TraceID())
	require.Contains(t, link.Attributes, tracing.LinkKind.String(tracing.LinkPreviousAttempt))

	s1 := attrs(spans(rec, "settle personaq.requests.planner", childOf(attempts[0]))[0])
	require.Equal(t, "retry", s1[tracing.Disposition].AsString())
	require.Equal(t, "nak", s1["messaging.operation.name"].AsString())
	require.Equal(t, "settle", s1["messaging.operation.type"].AsString())
	s2 := attrs(spans(rec, "settle personaq.requests.planner", childOf(attempts[1]))[0])
	require.Equal(t, "ack", s2[tracing.Disposition].AsString())
}

// A quarantined request's settle span says so with its reason; replaying
// the record starts a new trace whose send span links to the original
// request's, and the replay's attempt is a child of that send span.
func TestReplayedQuarantineRecordLinksToTheOriginalTrace(t *testing.T) {
	t.Parallel()
	e := newEnv(t, true)
	rec := tracetest.NewSpanRecorder()
	c, err := client.New(client.Config{JetStream: e.js, Logger: &e.log, TracerProvider: tracedProcess(rec, "orchestrator")})
	require.NoError(t, err)
	reject := handlers.Func(func(context.Context, *handlers.Request) (handlers.Result, error) {
		return handlers.Result{}, handlers.Terminal(fmt.Errorf("the prompt is malformed"))
	})
	e.serve(consumers.Config{TracerProvider: tracedProcess(rec, "replica-a")},
		consumers.Persona{Name: "reviewer", Handler: reject, Policy: policy(2, 5*time.Second)})
	req := schemas.NewRequest("story-43", "review", "reviewer")
	_, err = c.Run(context.Background(), req)
	require.ErrorIs(t, err, client.ErrBlocked)
	var stopped *client.StoppedError
	require.ErrorAs(t, err, &stopped)

	send := spans(rec, "send personaq.requests.reviewer", ofRequest(req.RequestID))
	require.Len(t, send, 1)
	var settle []sdktrace.ReadOnlySpan
	require.Eventually(t, func() bool {
		settle = spans(rec, "settle personaq.requests.reviewer", func(s sdktrace.ReadOnlySpan) bool {
			return s.SpanContext().TraceID() == send[0].SpanContext().TraceID()
		})
		return len(settle) == 1
	}, 10*time.Second, 10*time.Millisecond)
	sa := attrs(settle[0])
	require.Equal(t, "quarantine", sa[tracing.Disposition].AsString())
	require.Equal(t, "terminal", sa[tracing.Reason].AsString())
	require.Equal(t, "term", sa["messaging.operation.name"].AsString())
	require.Equal(t, int64(stopped.Record.QuarantineSeq), sa[tracing.QuarantineSeq].AsInt64())

	ins, err := dlq.NewInspector(dlq.InspectorConfig{JetStream: e.js, TracerProvider: tracedProcess(rec, "operator")})
	require.NoError(t, err)
	rep, err := ins.Replay(context.Background(), dlq.Selection{Seqs: []uint64{stopped.Record.QuarantineSeq}}, dlq.ReplayOptions{})
	require.NoError(t, err)
	require.Equal(t, 1, rep.Replayed, "%+v", rep.Items)
	replayID := rep.Items[0].NewRequestID

	replay := spans(rec, "send personaq.requests.reviewer", ofRequest(replayID))
	require.Len(t, replay, 1)
	require.Equal(t, trace.SpanKindProducer, replay[0].SpanKind())
	require.NotEqual(t, send[0].SpanContext().TraceID(), replay[0].SpanContext().TraceID(), "a replay is a new trace")
	require.False(t, replay[0].Parent().IsValid())
	require.Len(t, replay[0].Links(), 1)
	link := replay[0].Links()[0]
	require.Equal(t, send[0].SpanContext().TraceID(), link.SpanContext.TraceID())
	require.Equal(t, send[0].SpanContext().SpanID(), link.SpanContext.SpanID(), "the link names the original submit")
	require.Contains(t, link.Attributes, tracing.LinkKind.String(tracing.LinkReplayOf))
	ra := attrs(replay[0])
	require.Equal(t, rep.Items[0].RecordID, ra[tracing.ReplayOf].AsString())
	require.Equal(t, int64(1), ra[tracing.ReplayCount].AsInt64())

	var again []sdktrace.ReadOnlySpan
	require.Eventually(t, func() bool {
		again = spans(rec, "process personaq.requests.reviewer", ofRequest(replayID))
		return len(again) == 1
	}, 10*time.Second, 10*time.Millisecond)
	require.Equal(t, replay[0].SpanContext().TraceID(), again[0].SpanContext().TraceID())
	require.Equal(t, replay[0].SpanContext().SpanID(), again[0].Parent().SpanID())
}

// With tracing off on the replica (the default, a no-op provider), the
// submit's trace context still reaches the persona, and nothing of the
// replica is recorded; a message that never decodes is quarantined with
// its reason on the settle span when tracing is on.
func TestTraceContextPassesThroughAReplicaWithTracingOff(t *testing.T) {
	t.Parallel()
	e := newEnv(t, true)
	rec := tracetest.NewSpanRecorder()
	c, err := client.New(client.Config{JetStream: e.js, Logger: &e.log, TracerProvider: tracedProcess(rec, "orchestrator")})
	require.NoError(t, err)
	p := &tracedPersona{traceparent: map[int]string{}}
	srv := httptest.NewServer(p)
	t.Cleanup(srv.Close)
	inv, err := handlers.NewHTTP(handlers.HTTPConfig{URL: srv.URL})
	require.NoError(t, err)
	pol := retry.Policy{Name: "test", MaxAttempts: 3, AttemptTimeout: 5 * time.Second, Schedule: retry.Linear{Step: 50 * time.Millisecond}}
	e.serve(consumers.Config{TracerProvider: noop.NewTracerProvider()}, consumers.Persona{Name: "planner", Handler: inv, Policy: pol})

	req := schemas.NewRequest("story-44", "plan", "planner")
	_, err = c.Run(context.Background(), req)
	require.NoError(t, err)
	send := spans(rec, "send personaq.requests.planner", ofRequest(req.RequestID))
	require.Len(t, send, 1)
	require.Equal(t, traceparentOf(send[0]), p.header(1), "attempt 1 got the submit's context")
	require.Equal(t, traceparentOf(send[0]), p.header(2), "so did its retry")
	require.Len(t, rec.Ended(), 1, "only the orchestrator's span was recorded")
}

func TestUndecodableMessageIsTracedToItsQuarantine(t *testing.T) {
	t.Parallel()
	e := newEnv(t, true)
	rec := tracetest.NewSpanRecorder()
	e.serve(consumers.Config{TracerProvider: tracedProcess(rec, "replica-a")},
		consumers.Persona{Name: "echo", Handler: echoOutput(1), Policy: policy(2, 5*time.Second)})
	_, err := e.js.Publish(context.Background(), "personaq.requests.echo", []byte("not json"))
	require.NoError(t, err)
	var settle []sdktrace.ReadOnlySpan
	require.Eventually(t, func() bool {
		settle = spans(rec, "settle personaq.requests.echo", nil)
		return len(settle) == 1
	}, 10*time.Second, 10*time.Millisecond)
	sa := attrs(settle[0])
	require.Equal(t, "quarantine", sa[tracing.Disposition].AsString())
	require.Equal(t, "invalid_message", sa[tracing.Reason].AsString())
	process := spans(rec, "process personaq.requests.echo", nil)
	require.Len(t, process, 1)
	require.Equal(t, "quarantine", attrs(process[0])[tracing.Decision].AsString())
	require.False(t, process[0].Parent().IsValid(), "no context in the message: a root span")
}
