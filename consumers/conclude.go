package consumers

import (
	"context"
	"strconv"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/personaq/personaq/consumers/transport"
	"github.com/personaq/personaq/retry"
	"github.com/personaq/personaq/schemas"
)

// settleTimeout bounds the writes that end a request (output, quarantine
// record, terminal record): past it the message is released and retried.
const settleTimeout = 10 * time.Second

// conclude stores the request's terminal record (and a large output) and
// sets st.final to the record that stands: ours, or the one an earlier
// delivery or another replica wrote first, which is never overwritten.
func (r *Runtime) conclude(st *attemptState, outcome schemas.Outcome, qseq uint64) error {
	ctx, cancel := context.WithTimeout(context.Background(), settleTimeout)
	defer cancel()
	ev := r.outcomeEvent(st, outcome, qseq)
	if outcome == schemas.OutcomeSucceeded {
		if err := r.outcomes.keepOutput(ctx, ev, st.result.Output); err != nil {
			st.log.Error().Err(err).Msg("persona output not stored; message will be redelivered")
			return err
		}
	}
	final, won, err := r.outcomes.create(ctx, ev)
	if err != nil {
		st.log.Error().Err(err).Msg("terminal record not stored; message will be redelivered")
		return err
	}
	st.final = final
	if won {
		r.obs.Outcome(st.persona.name, final.Outcome, final.Reason)
		return nil
	}
	r.standing(st, ev.Outcome, ev.Reason, final)
	return nil
}

// standing logs (and counts, when it contradicts this delivery's own
// ending) a terminal record found already stored.
func (r *Runtime) standing(st *attemptState, outcome schemas.Outcome, reason schemas.Reason, final *schemas.OutcomeEvent) {
	if final.Outcome == outcome && final.Reason == reason {
		st.log.Info().Str("outcome", string(final.Outcome)).Msg("terminal record already stored; not written again")
		return
	}
	r.obs.SettleRefused(st.persona.name, outcome)
	st.log.Warn().Str("outcome", string(outcome)).Str("reason", string(reason)).Str("recorded_outcome", string(final.Outcome)).
		Str("recorded_reason", string(final.Reason)).Int("recorded_attempts", final.Attempts).
		Msg("request already has a different terminal record; this settle is refused and the record stands")
}

// settleFinal settles the message the way the standing record says: acked
// when it succeeded, termed otherwise. Either removes it from the queue.
func settleFinal(msg *message.Message, final *schemas.OutcomeEvent) {
	if final.Outcome == schemas.OutcomeSucceeded {
		msg.Ack()
		return
	}
	transport.AckWithTerm(msg, string(final.Reason))
}

// concludedBefore catches a redelivery of a request whose terminal record
// exists (its worker died after writing it, or Redis lost the ledger): it
// is settled the way the record says, without running the handler again.
// Only redeliveries pay for the lookup.
func (r *Runtime) concludedBefore(ctx context.Context, st *attemptState) bool {
	if st.delivery.Delivered < 2 || st.req == nil {
		return false
	}
	return r.settledByRecord(ctx, st)
}

// settledByRecord settles st the way the request's terminal record says,
// when it has one.
func (r *Runtime) settledByRecord(ctx context.Context, st *attemptState) bool {
	lctx, cancel := context.WithTimeout(ctx, settleTimeout)
	defer cancel()
	final, err := r.outcomes.Lookup(lctx, st.req.RequestID)
	if err != nil {
		if err != ErrNoOutcome {
			st.log.Warn().Err(err).Msg("terminal record lookup failed; running the attempt")
		}
		return false
	}
	st.final, st.verdict = final, verdictSettled
	st.log.Info().Str("outcome", string(final.Outcome)).Int("attempts", final.Attempts).
		Msg("redelivery of a request that already has its terminal record; settled without running the handler")
	return true
}

// outcomeKey identifies the request a record belongs to: its request id,
// or where it was stored when it never decoded.
func outcomeKey(st *attemptState) string {
	if st.req != nil {
		return st.req.RequestID
	}
	return st.delivery.Stream + "." + strconv.FormatUint(st.delivery.Sequence, 10)
}

func (r *Runtime) outcomeEvent(st *attemptState, outcome schemas.Outcome, qseq uint64) *schemas.OutcomeEvent {
	ev := &schemas.OutcomeEvent{
		SchemaVersion: schemas.Version, Outcome: outcome, Persona: st.persona.name,
		Reason: schemas.Reason(st.decision.Reason), Detail: st.decision.Detail, Attempts: st.attempt.Number,
		Agent: st.attempt.Agent, CorrelationID: st.corrID, QuarantineSeq: qseq,
		DurationMs: r.now().Sub(st.started).Milliseconds(), At: r.now().UTC(), LastError: st.attempt.Error,
		RequestID: outcomeKey(st), TaskID: "unknown", Step: "unknown",
	}
	if st.stored != nil {
		ev.Reason, ev.Attempts, ev.Detail = st.stored.Reason, st.stored.Attempts, st.stored.Detail
	}
	ev.Blocked = st.decision.Blocked || ev.Reason == schemas.ReasonExhausted || ev.Reason == schemas.ReasonTerminal
	if st.req != nil {
		ev.TaskID, ev.Step, ev.SubmittedAt = st.req.TaskID, st.req.Step, st.req.CreatedAt.UTC()
		if !st.req.CreatedAt.IsZero() {
			ev.DurationMs = max(ev.At.Sub(st.req.CreatedAt).Milliseconds(), 0) // submit to end, retries included
		}
	}
	if p := st.attempt.Progress; p.Known() {
		ev.Progress = &schemas.Progress{Completed: p.Completed, Total: p.Total}
	}
	ev.Usage = st.spent().Record()
	if st.stored != nil { // quarantined by an earlier delivery: its record has the history
		ev.Usage = st.stored.Usage
	}
	return ev
}

func outcomeFor(reason schemas.Reason) schemas.Outcome {
	switch reason {
	case schemas.ReasonDeferred:
		return schemas.OutcomeDeferred
	case schemas.ReasonEscalated:
		return schemas.OutcomeEscalated
	case schemas.ReasonDeadlineExceeded:
		return schemas.OutcomeDeadlineExceeded
	}
	return schemas.OutcomeQuarantined
}

// deadlineDecision ends a request whose caller's step deadline has passed
// (or would pass before the next attempt could start).
func deadlineDecision(deadline time.Time, why string) retry.Decision {
	return retry.Decision{
		Action: retry.ActionQuarantine, Reason: schemas.ReasonDeadlineExceeded,
		Detail: "step deadline " + deadline.UTC().Format(time.RFC3339) + " " + why,
	}
}
