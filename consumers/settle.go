package consumers

import (
	"context"
	"fmt"
	"runtime/debug"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/personaq/personaq/schemas"
)

// faultDelay is how long a message waits after a fault in personaq itself
// (quarantine write failed, a bug): it is redelivered, never lost.
const faultDelay = 5 * time.Second

// settleMiddleware is the outermost link: it creates the attempt state, runs
// the chain and then settles the message from the verdict. It never returns
// an error to the router: every message is acked or nacked here.
func (r *Runtime) settleMiddleware(next message.HandlerFunc) message.HandlerFunc {
	return func(msg *message.Message) (_ []*message.Message, _ error) {
		st, err := r.newState(msg)
		if err != nil {
			r.log.Error().Err(err).Str("message", msg.UUID).Msg("cannot route message; releasing")
			NackWithDelay(msg, faultDelay)
			return nil, nil
		}
		defer func() {
			if p := recover(); p != nil {
				st.log.Error().Interface("panic", p).Bytes("stack", debug.Stack()).Msg("personaq pipeline panicked; message released")
				NackWithDelay(msg, faultDelay)
			}
		}()
		if _, err := next(msg); err != nil {
			st.log.Error().Err(err).Msg("pipeline error; message released")
			NackWithDelay(msg, faultDelay)
			return nil, nil
		}
		r.apply(msg, st)
		return nil, nil
	}
}

func (r *Runtime) newState(msg *message.Message) (*attemptState, error) {
	d, ok := DeliveryFrom(msg.Context())
	if !ok {
		return nil, fmt.Errorf("message %s has no JetStream delivery", msg.UUID)
	}
	p, ok := r.personas[message.SubscribeTopicFromCtx(msg.Context())]
	if !ok {
		return nil, fmt.Errorf("%w: topic %q", ErrUnknownPersona, message.SubscribeTopicFromCtx(msg.Context()))
	}
	st := &attemptState{
		persona: p, delivery: d, started: r.now(),
		log: r.log.With().Str("persona", p.name).Uint64("stream_seq", d.Sequence).Logger(),
	}
	withState(msg, st)
	return st, nil
}

// apply settles msg according to st.verdict.
func (r *Runtime) apply(msg *message.Message, st *attemptState) {
	switch st.verdict {
	case verdictAck:
		// The outcome is confirmed before the ack: a crash in between
		// redelivers the message, which the ledger acks as a duplicate and
		// whose outcome is published again (deduplicated by message id).
		if err := r.publishOutcome(st, schemas.OutcomeSucceeded, 0); err != nil {
			NackWithDelay(msg, faultDelay)
			return
		}
		msg.Ack()
	case verdictRetry, verdictRelease:
		NackWithDelay(msg, st.delay)
	case verdictQuarantine:
		r.quarantine(msg, st)
	default:
		st.log.Error().Msg("pipeline reached no verdict; message released")
		NackWithDelay(msg, faultDelay)
	}
}

// quarantine stores the record first and only then terms the source
// message; if the write fails the message is redelivered (STYLE lesson 5).
func (r *Runtime) quarantine(msg *message.Message, st *attemptState) {
	rec, seq := st.stored, st.storedSeq
	if rec == nil {
		rec = r.record(msg, st)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		var dup bool
		var err error
		if seq, dup, err = r.dlq.Put(ctx, rec); err != nil {
			st.log.Error().Err(err).Str("reason", string(rec.Reason)).Msg("quarantine write failed; message will be redelivered")
			NackWithDelay(msg, faultDelay)
			return
		}
		if dup {
			st.log.Info().Uint64("quarantine_seq", seq).Msg("quarantine record already stored; duplicate skipped")
		}
	}
	if err := r.publishOutcome(st, outcomeFor(rec.Reason), seq); err != nil {
		NackWithDelay(msg, faultDelay)
		return
	}
	AckWithTerm(msg, string(rec.Reason))
}

func outcomeFor(reason schemas.Reason) schemas.Outcome {
	switch reason {
	case schemas.ReasonDeferred:
		return schemas.OutcomeDeferred
	case schemas.ReasonEscalated:
		return schemas.OutcomeEscalated
	}
	return schemas.OutcomeQuarantined
}
