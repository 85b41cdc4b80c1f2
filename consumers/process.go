package consumers

import (
	"context"
	"fmt"
	"runtime/debug"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"go.opentelemetry.io/otel/trace"

	"github.com/personaq/personaq/consumers/transport"
)

// faultDelay is how long a message waits after a fault in personaq itself
// (a record write failed, a bug): it is redelivered, never lost.
const faultDelay = 5 * time.Second

// process is the router's handler for every persona: one delivery, top to
// bottom. Each stage either passes the delivery on or returns how it ends;
// commit (commit.go) carries that ending out, and nothing else writes its
// terminal record or settles its message. The stages up to begin, and
// invoke's set-up of the handler's run, go on the router's goroutine; the
// handler, decide and commit on the attempt's own (invokeApart).
//
//	decode  the request, its policy and step deadline; a message that does
//	        not decode is quarantined (invalid_message), unrun
//	cancel  a request already cancelled is settled as its record says,
//	        unrun (cancelWatch: most deliveries pay no lookup for it); one
//	        not started within its queue wait ends unrun (queueWaited)
//	last    the delivery MaxDeliver allows last is quarantined unrun
//	        (max_deliveries): the server would give up on it unrecorded
//	admit   flow control: a persona whose circuit is open or whose limiter
//	        cools down is not called; released without counting
//	begin   the ledger numbers the attempt and leases it; a step already
//	        done, ended before, running elsewhere, or a ledger that cannot
//	        be reached, ends here without running the handler
//	invoke  the handler, under the attempt's timeout; a panic is terminal
//	decide  the outcome classified; retry.Decide says what comes next (no
//	        I/O: flow control's part is returned as effects)
//	commit  effects applied; the attempt recorded in the ledger; the
//	        quarantine record and the terminal record; then the settle:
//	        Ack, Term, RetryAfter, Release, or Abandon when the lease was
//	        lost (fenced)
//
// It always returns nil: every message is settled here, so the router's
// own ack after a handler is a no-op.
func (r *Runtime) process(msg *message.Message) error {
	st, err := r.newState(msg)
	if err != nil {
		r.log.Error().Err(err).Str("message", msg.UUID).Msg("cannot route message; releasing")
		if d, ok := transport.DeliveryFrom(msg.Context()); ok {
			_ = d.Release(faultDelay)
		}
		return nil
	}
	ctx, span := r.startProcessSpan(msg, st)
	a := &flight{ctx: ctx, span: span, st: st}
	defer func() { r.recovered(a, recover()) }()
	end, invoke := r.prepare(ctx, msg, a)
	if !invoke {
		r.finish(a, end)
		return nil
	}
	if !r.attempts.add() {
		r.finish(a, r.notStarted(a))
		return nil
	}
	go r.invokeApart(a) // one attempt, not a loop: see invokeApart
	return nil
}

// notStarted ends an attempt whose stages before the handler outlived
// Run's drain: the handler does not start (Run no longer waits for it),
// and the attempt is released uncounted, as one cut short by a shutdown.
func (r *Runtime) notStarted(a *flight) ending {
	defer a.endAttempt()
	a.cancel(transport.ErrShuttingDown)
	return r.decide(a.actx, a.st, ran{err: context.Cause(a.actx)})
}

// flight is one delivery on its way through the stages.
type flight struct {
	ctx  context.Context // the delivery's, with its span
	span trace.Span
	st   *attemptState
	// Set when the handler is to run: the attempt's context, which ends
	// when its lease is lost or its request is cancelled, and what ends
	// it and stops watching for its cancellation once the handler returned.
	actx    context.Context
	cancel  context.CancelCauseFunc
	call    *handlerCall // the handler's run, under actx
	untrack func()
	ended   bool // endAttempt ran
}

// recovered ends a delivery whose pipeline panicked: it is released (a
// no-op if commit settled it already), never lost.
func (r *Runtime) recovered(a *flight, p any) {
	if p != nil {
		a.st.log.Error().Interface("panic", p).Bytes("stack", debug.Stack()).Msg("personaq pipeline panicked; message released")
		a.endAttempt()
		r.leases.remove(a.st.lease)
		_ = a.st.delivery.Release(faultDelay)
		a.span.End()
	}
}

// prepare runs the stages before the handler; the first that decides how
// the delivery ends returns it, else it readies the attempt's context and
// reports that the handler is to run.
func (r *Runtime) prepare(ctx context.Context, msg *message.Message, a *flight) (ending, bool) {
	st := a.st
	if end, done := r.decode(msg, st); done {
		return end, false
	}
	if end, done := r.cancelledBefore(ctx, st); done {
		return end, false
	}
	if end, done := r.queueWaited(ctx, st); done {
		return end, false
	}
	if end, done := r.lastDelivery(st); done {
		return end, false
	}
	if end, done := r.admit(st); done {
		return end, false
	}
	if end, done := r.begin(ctx, st); done {
		return end, false
	}
	// The attempt's context ends when its lease is lost (the lease keeper
	// cancels it), so a handler stops work another replica may now run,
	// and when its request is cancelled (the cancel watch cancels it).
	a.actx, a.cancel = attemptContext(ctx, st.delivery)
	if st.lease != nil {
		r.holdLease(st, a.cancel)
	}
	a.untrack = r.cancels.track(st.req.RequestID, a.cancel)
	st.invoked = true
	a.call = r.startInvoke(a.actx, st)
	return ending{}, true
}

// attemptContext is the attempt's context and what ends it with a cause:
// the message's own context and the cancel the delivery lends
// (transport.Delivery.WorkCancel), one cancellable context fewer per
// attempt in flight; for a delivery made outside a Subscriber, a context
// of its own under ctx. Once the attempt ended, its record is stored under
// the delivery's HoldContext, which this cancel does not end.
func attemptContext(ctx context.Context, d *transport.Delivery) (context.Context, context.CancelCauseFunc) {
	if cancel := d.WorkCancel(); cancel != nil {
		return ctx, cancel
	}
	return context.WithCancelCause(ctx)
}

// invokeApart runs the handler, then decides and commits, on a goroutine
// of its own: the router's goroutine, grown deep by the stages before (the
// ledger's Redis calls), returns, and the handler parks on a small stack —
// with thousands of slow requests in flight, stacks are most of a
// replica's memory. Only invokeApart's own frame is under the handler:
// everything before it ran in prepare (startInvoke), everything after
// runs from its deferred concludeApart. Run waits for these goroutines.
func (r *Runtime) invokeApart(a *flight) {
	defer r.concludeApart(a)
	c := a.call
	c.out.result, c.out.err = c.st.persona.handle(c.ctx, c.req)
}

// concludeApart, deferred by invokeApart, takes a panic of the handler as
// its attempt's terminal outcome, then decides and commits.
func (r *Runtime) concludeApart(a *flight) {
	r.handlerPanicked(a.call, recover())
	r.decideAndCommit(a)
}

// decideAndCommit ends the attempt once its handler returned; a panic of
// the pipeline's own is recovered (the message released).
//
//go:noinline
func (r *Runtime) decideAndCommit(a *flight) {
	defer r.attempts.done()
	defer func() { r.recovered(a, recover()) }()
	r.finish(a, r.decideApart(a))
}

//go:noinline
func (r *Runtime) decideApart(a *flight) ending {
	defer a.endAttempt()
	r.endInvoke(a.call)
	return r.decide(a.actx, a.st, a.call.out)
}

// endAttempt stops watching for the attempt's cancellation and ends its
// context, once (after decide, or when its pipeline panicked).
func (a *flight) endAttempt() {
	if a.cancel == nil || a.ended {
		return
	}
	a.ended = true
	if a.untrack != nil { // nil only if prepare panicked between the two
		a.untrack()
	}
	a.cancel(nil)
}

// finish commits how the delivery ends. The handler is done: its slot
// goes to the next message while this one's terminal record is stored and
// its settle sent, so concurrent completions share record batches instead
// of each holding a slot through its commit (transport.Delivery.WorkDone
// bounds how many).
func (r *Runtime) finish(a *flight, end ending) {
	a.st.delivery.WorkDone()
	end = r.tracedCommit(a, end)
	annotateAttempt(a.span, a.st, end)
	a.span.End()
}

func (r *Runtime) newState(msg *message.Message) (*attemptState, error) {
	d, ok := transport.DeliveryFrom(msg.Context())
	if !ok {
		return nil, fmt.Errorf("message %s has no JetStream delivery", msg.UUID)
	}
	p, ok := r.personas[message.SubscribeTopicFromCtx(msg.Context())]
	if !ok {
		return nil, fmt.Errorf("%w: topic %q", ErrUnknownPersona, message.SubscribeTopicFromCtx(msg.Context()))
	}
	return &attemptState{
		persona: p, delivery: d, started: r.now(),
		log: r.deliveryLog(p, d.Sequence),
	}, nil
}
