package consumers

import (
	"context"
	"fmt"
	"runtime/debug"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/personaq/personaq/consumers/transport"
)

// faultDelay is how long a message waits after a fault in personaq itself
// (a record write failed, a bug): it is redelivered, never lost.
const faultDelay = 5 * time.Second

// process is the router's handler for every persona: one delivery, top to
// bottom. Each stage either passes the delivery on or returns how it ends;
// commit (commit.go) carries that ending out, and nothing else writes its
// terminal record or settles its message.
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
	ctx, span := r.startProcessSpan(msg, st.delivery)
	defer span.End()
	defer func() {
		if p := recover(); p != nil {
			st.log.Error().Interface("panic", p).Bytes("stack", debug.Stack()).Msg("personaq pipeline panicked; message released")
			r.leases.remove(st.lease)
			_ = st.delivery.Release(faultDelay) // a no-op if commit settled it already
		}
	}()
	end := r.tracedCommit(ctx, st, r.run(ctx, msg, st))
	annotateAttempt(span, st, end)
	return nil
}

// run is the stages before commit; the first that decides how the
// delivery ends returns.
func (r *Runtime) run(ctx context.Context, msg *message.Message, st *attemptState) ending {
	if end, done := r.decode(msg, st); done {
		return end
	}
	if end, done := r.cancelledBefore(ctx, st); done {
		return end
	}
	if end, done := r.queueWaited(ctx, st); done {
		return end
	}
	if end, done := r.lastDelivery(st); done {
		return end
	}
	if end, done := r.admit(st); done {
		return end
	}
	if end, done := r.begin(ctx, st); done {
		return end
	}
	// The attempt's context ends when its lease is lost (the lease keeper
	// cancels it), so a handler stops work another replica may now run,
	// and when its request is cancelled (the cancel watch cancels it).
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	if st.lease != nil {
		r.holdLease(st, cancel)
	}
	defer r.cancels.track(st.req.RequestID, cancel)()
	st.invoked = true
	return r.decide(ctx, st, r.invoke(ctx, st))
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
		persona: p, delivery: d, started: r.now(), held: msg.Context(),
		log: r.log.With().Str("persona", p.name).Uint64("stream_seq", d.Sequence).Logger(),
	}, nil
}
