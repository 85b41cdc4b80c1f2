package consumers

import (
	"context"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/personaq/personaq/consumers/tracing"
	"github.com/personaq/personaq/retry"
)

// startProcessSpan starts the delivery's consumer span ("process
// <subject>"), the child of the span whose trace context the message
// carries (the submit's), so every attempt of a request, on any replica, is
// in the submit's trace. The attempt's context carries the span to the
// persona (the HTTP invoker's traceparent header, the command invoker's
// TRACEPARENT). When the span is not recorded (tracing off, not sampled)
// it is dropped at once and the incoming context is passed on as it came:
// with thousands of attempts in flight, a span and a context node that
// record nothing would be held by each for its whole run.
func (r *Runtime) startProcessSpan(msg *message.Message, st *attemptState) (context.Context, trace.Span) {
	d := st.delivery
	in := tracing.ExtractMap(msg.Context(), msg.Metadata)
	ctx, span := r.tracer.Start(in, st.persona.spans.name("process", st.persona.spans.process, d.Subject), consumerKind)
	if !span.IsRecording() {
		return in, noSpan
	}
	span.SetAttributes(tracing.ProcessAttributes(d.Subject, d.Consumer, d.HeaderGet(jetstream.MsgIDHeader), d.Stream, d.Sequence, d.Delivered)...)
	return ctx, span
}

// noSpan stands for a process span that records nothing.
var noSpan = trace.SpanFromContext(context.Background())

// The span kinds, as options made once.
var (
	consumerKind = trace.WithSpanKind(trace.SpanKindConsumer)
	clientKind   = trace.WithSpanKind(trace.SpanKindClient)
)

// spanNames are a persona's span names, made once: its requests all come
// on its one request subject.
type spanNames struct{ subject, process, settle string }

func newSpanNames(subject string) spanNames {
	return spanNames{subject: subject, process: tracing.SpanName("process", subject), settle: tracing.SpanName("settle", subject)}
}

// name is made, the span name of op on subject: made only for a subject
// other than the persona's.
func (n spanNames) name(op, made, subject string) string {
	if subject == n.subject {
		return made
	}
	return tracing.SpanName(op, subject)
}

// annotateAttempt sets what the delivery's attempt was and how it ended.
func annotateAttempt(span trace.Span, st *attemptState, end ending) {
	if !span.IsRecording() {
		return
	}
	a := []attribute.KeyValue{tracing.Persona.String(st.persona.name)}
	if q := st.req; q != nil {
		a = append(a, tracing.TaskID.String(q.TaskID), tracing.Step.String(q.Step), tracing.RequestID.String(q.RequestID),
			tracing.Correlation.String(st.corrID))
	}
	if n := len(st.history); n > 0 {
		if l, ok := tracing.LinkTo(st.history[n-1].Trace, tracing.LinkPreviousAttempt); ok {
			span.AddLink(l)
		}
	}
	a = append(a, tracing.Decision.String(verdictName(end)))
	if !st.attempt.At.IsZero() { // a handler ran
		a = append(a, attemptAttributes(st, end)...)
	}
	if at := st.attempt; at.Class.Failed() {
		a = append(a, semconv.ErrorTypeKey.String(at.Class.String()))
		span.SetStatus(codes.Error, at.Error)
	}
	span.SetAttributes(a...)
}

// attemptAttributes describe an attempt that ran: who ran it, how it
// ended, what comes next, and what it reported.
func attemptAttributes(st *attemptState, end ending) []attribute.KeyValue {
	at := st.attempt
	a := []attribute.KeyValue{tracing.Attempt.Int(at.Number), tracing.MaxAttempts.Int(st.policy.MaxAttempts),
		tracing.Agent.String(at.Agent), tracing.Role.String(string(at.Role)), tracing.Class.String(at.Class.String())}
	if end.decision.Action == retry.ActionRetry && end.verdict == verdictRetry {
		a = append(a, tracing.Seconds(tracing.NextDelay, end.decision.Delay), tracing.NextAgent.String(st.agentFor(end.decision.Role)))
	}
	if end.decision.Reason != "" {
		a = append(a, tracing.Reason.String(string(end.decision.Reason)))
	}
	if p := at.Progress; p.Known() {
		a = append(a, tracing.ProgressCompleted.Int(p.Completed), tracing.ProgressTotal.Int(p.Total))
	}
	a = append(a, tracing.UsageAttributes(at.Usage.InputTokens, at.Usage.OutputTokens)...)
	if at.Usage.CostUSD > 0 {
		a = append(a, tracing.CostUSD.Float64(at.Usage.CostUSD))
	}
	return a
}

// verdictName names what the pipeline decided for a delivery.
func verdictName(end ending) string {
	switch end.verdict {
	case verdictAck:
		if end.duplicate {
			return "duplicate"
		}
		return "ack"
	case verdictRetry:
		return "retry"
	case verdictRelease:
		return "release"
	case verdictQuarantine:
		if end.decision.Action == retry.ActionDefer || end.decision.Action == retry.ActionEscalate {
			return end.decision.Action.String()
		}
		return "quarantine"
	case verdictSettled:
		return "settled_before"
	case verdictFenced:
		return "fenced"
	}
	return "none"
}

// tracedCommit is commit inside a settle span ("settle <subject>", a
// child of the delivery's span) that says how the message was settled.
// A delivery whose span records nothing has no settle span either.
func (r *Runtime) tracedCommit(a *flight, end ending) ending {
	st := a.st
	if !a.span.IsRecording() {
		return r.commit(st, end)
	}
	_, span := r.tracer.Start(a.ctx, st.persona.spans.name("settle", st.persona.spans.settle, st.delivery.Subject), clientKind)
	defer span.End()
	end = r.commit(st, end)
	if span.IsRecording() {
		span.SetAttributes(settleAttributes(st, end)...)
	}
	return end
}

// settleAttributes describe the settle commit made, from the ending it
// carried out.
func settleAttributes(st *attemptState, end ending) []attribute.KeyValue {
	subject := st.delivery.Subject
	switch end.settled {
	case settledAck:
		return append(tracing.SettleAttributes(subject, "ack"), tracing.Disposition.String("ack"))
	case settledTerm:
		a := append(tracing.SettleAttributes(subject, "term"), tracing.Disposition.String("quarantine"),
			tracing.Reason.String(string(end.final.Reason)), tracing.Outcome.String(string(end.final.Outcome)),
			tracing.QuarantineSeq.Int64(int64(end.final.QuarantineSeq)))
		return a
	case settledRetry, settledRelease:
		disp := "release"
		if end.settled == settledRetry {
			disp = "retry"
		}
		return append(tracing.SettleAttributes(subject, "nak"), tracing.Disposition.String(disp),
			tracing.Seconds(tracing.NextDelay, end.delay))
	}
	return append(tracing.SettleAttributes(subject, "none"), tracing.Disposition.String("fenced"))
}
