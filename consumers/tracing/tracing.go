package tracing

import (
	"context"
	"time"

	"github.com/nats-io/nats.go"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
)

// ScopeName is the instrumentation scope of personaq's spans.
const ScopeName = "github.com/personaq/personaq"

// Tracer returns personaq's tracer from tp (nil: the global provider).
func Tracer(tp trace.TracerProvider) trace.Tracer {
	if tp == nil {
		tp = otel.GetTracerProvider()
	}
	return tp.Tracer(ScopeName)
}

// Header names of the W3C trace context, as they travel in JetStream
// message headers (NATS header names are case-sensitive: these are the
// lowercase names the W3C specification uses).
const (
	HeaderTraceparent = "traceparent"
	HeaderTracestate  = "tracestate"
)

// HeaderCarrier adapts a NATS message's headers to a TextMapCarrier.
type HeaderCarrier nats.Header

var _ propagation.TextMapCarrier = HeaderCarrier{}

// Get returns the first value of key.
func (c HeaderCarrier) Get(key string) string { return nats.Header(c).Get(key) }

// Set replaces the values of key.
func (c HeaderCarrier) Set(key, value string) { nats.Header(c).Set(key, value) }

// Keys lists the header names.
func (c HeaderCarrier) Keys() []string {
	keys := make([]string, 0, len(c))
	for k := range c {
		keys = append(keys, k)
	}
	return keys
}

// Inject writes ctx's trace context into h (with the global propagator).
// The trace headers h already has are removed first, so a message copied
// from another (a replay) never carries a stale context.
func Inject(ctx context.Context, h nats.Header) {
	h.Del(HeaderTraceparent)
	h.Del(HeaderTracestate)
	otel.GetTextMapPropagator().Inject(ctx, HeaderCarrier(h))
}

// Extract returns ctx with the trace context that h carries (unchanged
// when it carries none).
func Extract(ctx context.Context, h nats.Header) context.Context {
	return otel.GetTextMapPropagator().Extract(ctx, HeaderCarrier(h))
}

// ExtractMap is Extract for a map of header name to value (a watermill
// message's metadata).
func ExtractMap(ctx context.Context, m map[string]string) context.Context {
	return otel.GetTextMapPropagator().Extract(ctx, propagation.MapCarrier(m))
}

// Traceparent formats the context of the span in ctx as a W3C traceparent
// ("00-<trace id>-<span id>-<flags>"), for a link to it later; empty when
// that span is not recorded (tracing off, not sampled, a remote parent).
func Traceparent(ctx context.Context) string {
	span := trace.SpanFromContext(ctx)
	sc := span.SpanContext()
	if !span.IsRecording() || !sc.IsValid() {
		return ""
	}
	return "00-" + sc.TraceID().String() + "-" + sc.SpanID().String() + "-" + sc.TraceFlags().String()
}

// ParseTraceparent reads a W3C traceparent; ok is false for anything else.
func ParseTraceparent(tp string) (trace.SpanContext, bool) {
	if tp == "" {
		return trace.SpanContext{}, false
	}
	ctx := propagation.TraceContext{}.Extract(context.Background(), propagation.MapCarrier{HeaderTraceparent: tp})
	sc := trace.SpanContextFromContext(ctx)
	return sc, sc.IsValid()
}

// Link kinds, the value of LinkKind on the links personaq adds.
const (
	// LinkPreviousAttempt links a retry's span to the attempt before it.
	LinkPreviousAttempt = "previous_attempt"
	// LinkReplayOf links a replay's send span to the replayed request's.
	LinkReplayOf = "replay_of"
)

// LinkKind says what a link points at (LinkPreviousAttempt, LinkReplayOf).
const LinkKind = attribute.Key("personaq.link")

// LinkTo is a link to the span a traceparent names, of kind; ok is false
// when tp is not a valid traceparent.
func LinkTo(tp, kind string) (trace.Link, bool) {
	sc, ok := ParseTraceparent(tp)
	if !ok {
		return trace.Link{}, false
	}
	return trace.Link{SpanContext: sc, Attributes: []attribute.KeyValue{LinkKind.String(kind)}}, true
}

// The messaging attributes personaq sets beside those of the OpenTelemetry
// messaging conventions, which define no NATS-specific ones yet. They
// follow the conventions' pattern for other systems
// (messaging.<system>.message.delivery_count, as Service Bus has).
const (
	// MessagingNATSDeliveryCount is JetStream's delivery count of the
	// message (every delivery; attempts are personaq.attempt).
	MessagingNATSDeliveryCount = attribute.Key("messaging.nats.message.delivery_count")
	// MessagingNATSStream is the JetStream stream the message is stored in.
	MessagingNATSStream = attribute.Key("messaging.nats.stream.name")
	// MessagingNATSSequence is the message's stream sequence.
	MessagingNATSSequence = attribute.Key("messaging.nats.stream.sequence")
)

// MessagingSystem is messaging.system for every personaq span.
var MessagingSystem = semconv.MessagingSystemKey.String("nats")

// personaq's own attributes.
const (
	Persona     = attribute.Key("personaq.persona")
	TaskID      = attribute.Key("personaq.task_id")
	Step        = attribute.Key("personaq.step")
	RequestID   = attribute.Key("personaq.request_id")
	Correlation = attribute.Key("personaq.correlation_id")
	Attempt     = attribute.Key("personaq.attempt")
	MaxAttempts = attribute.Key("personaq.max_attempts")
	Agent       = attribute.Key("personaq.agent")
	Role        = attribute.Key("personaq.agent_role")
	// Class is how the attempt ended (succeeded, retryable, timeout, …).
	Class = attribute.Key("personaq.class")
	// Decision is what the retry policy decided (ack, retry, quarantine,
	// defer, escalate) or why no attempt ran (release, duplicate, …).
	Decision = attribute.Key("personaq.decision")
	// NextDelay is the delay before the next attempt, in seconds.
	NextDelay = attribute.Key("personaq.next_delay_s")
	// NextAgent is the agent of the next attempt.
	NextAgent = attribute.Key("personaq.next_agent")
	// Progress is the tasks completed and total the attempt reported.
	ProgressCompleted = attribute.Key("personaq.progress.completed")
	ProgressTotal     = attribute.Key("personaq.progress.total")
	// Disposition is how a settle span settled the message: ack, retry,
	// release, quarantine, fenced (nothing settled: the lease was lost).
	Disposition = attribute.Key("personaq.disposition")
	// Reason is a quarantine's (or terminal record's) reason.
	Reason = attribute.Key("personaq.reason")
	// Outcome is the terminal record's outcome.
	Outcome = attribute.Key("personaq.outcome")
	// QuarantineSeq is the quarantine record's sequence.
	QuarantineSeq = attribute.Key("personaq.quarantine.seq")
	// ReplayOf is the quarantine record a replay republishes.
	ReplayOf = attribute.Key("personaq.replay.of")
	// ReplayCount numbers the replays of one record.
	ReplayCount = attribute.Key("personaq.replay.count")
	// Duplicate: the server had stored this message id already; nothing
	// new was published.
	Duplicate = attribute.Key("personaq.duplicate")
)

// Seconds is d as the value of a duration attribute in seconds.
func Seconds(key attribute.Key, d time.Duration) attribute.KeyValue {
	return key.Float64(d.Seconds())
}

// CostUSD is the provider cost an attempt reported (the GenAI conventions
// define none).
const CostUSD = attribute.Key("personaq.usage.cost_usd")

// The GenAI usage attributes of the OpenTelemetry GenAI conventions.
const (
	GenAIUsageInputTokens  = attribute.Key("gen_ai.usage.input_tokens")
	GenAIUsageOutputTokens = attribute.Key("gen_ai.usage.output_tokens")
)

// UsageAttributes are the GenAI usage attributes for the tokens a persona
// reported; none when it reported no usage (both zero).
func UsageAttributes(inputTokens, outputTokens int64) []attribute.KeyValue {
	if inputTokens <= 0 && outputTokens <= 0 {
		return nil
	}
	return []attribute.KeyValue{GenAIUsageInputTokens.Int64(inputTokens), GenAIUsageOutputTokens.Int64(outputTokens)}
}

// SendAttributes are the messaging attributes of a producer span that
// publishes message id to subject.
func SendAttributes(subject, msgID string) []attribute.KeyValue {
	return []attribute.KeyValue{
		MessagingSystem, semconv.MessagingOperationTypeSend, semconv.MessagingOperationName("publish"),
		semconv.MessagingDestinationName(subject), semconv.MessagingMessageID(msgID),
	}
}

// ProcessAttributes are the messaging attributes of a consumer span that
// processes one delivery.
func ProcessAttributes(subject, consumer, msgID, stream string, seq, delivered uint64) []attribute.KeyValue {
	a := []attribute.KeyValue{
		MessagingSystem, semconv.MessagingOperationTypeProcess, semconv.MessagingOperationName("process"),
		semconv.MessagingDestinationName(subject), semconv.MessagingConsumerGroupName(consumer),
		MessagingNATSStream.String(stream), MessagingNATSSequence.Int64(int64(seq)),
		MessagingNATSDeliveryCount.Int64(int64(delivered)),
	}
	if msgID != "" {
		a = append(a, semconv.MessagingMessageID(msgID))
	}
	return a
}

// SettleAttributes are the messaging attributes of a settle span; op is
// the JetStream acknowledgement sent (ack, nak, term) or none.
func SettleAttributes(subject, op string) []attribute.KeyValue {
	return []attribute.KeyValue{
		MessagingSystem, semconv.MessagingOperationTypeSettle, semconv.MessagingOperationName(op),
		semconv.MessagingDestinationName(subject),
	}
}

// SpanName is "<operation> <destination>", the messaging conventions'
// span name.
func SpanName(op, subject string) string { return op + " " + subject }

// Sent is where a published message was stored, for EndSend.
type Sent struct {
	Stream    string
	Sequence  uint64
	Duplicate bool
}

// StartSend starts the producer span of publishing a persona request with
// id requestID to subject ("send <subject>"); the message must carry the
// returned context (Inject). End it with EndSend.
func StartSend(ctx context.Context, tr trace.Tracer, subject, requestID string, attrs ...attribute.KeyValue) (context.Context, trace.Span) {
	ctx, span := tr.Start(ctx, SpanName("send", subject), trace.WithSpanKind(trace.SpanKindProducer))
	if span.IsRecording() {
		span.SetAttributes(SendAttributes(subject, requestID)...)
		span.SetAttributes(RequestID.String(requestID))
		span.SetAttributes(attrs...)
	}
	return ctx, span
}

// EndSend ends a send span with where the message was stored, or the
// error that kept it from being stored.
func EndSend(span trace.Span, sent Sent, err error) {
	if span.IsRecording() {
		if err != nil {
			span.SetStatus(codes.Error, err.Error())
		} else {
			span.SetAttributes(MessagingNATSStream.String(sent.Stream), MessagingNATSSequence.Int64(int64(sent.Sequence)),
				Duplicate.Bool(sent.Duplicate))
		}
	}
	span.End()
}
