package consumers

import (
	"context"
	"strconv"
	"time"

	"github.com/personaq/personaq/retry"
	"github.com/personaq/personaq/schemas"
)

// settleTimeout bounds the writes that end a request (output, quarantine
// record, terminal record): past it the message is released and retried.
const settleTimeout = 10 * time.Second

// conclude stores the request's terminal record (and a large output) and
// sets end.final to the record that stands: ours, or the one an earlier
// delivery or another replica wrote first, which is never overwritten.
// Its one caller is commit's storeTerminal (commit.go).
//
// Both writes share one patience (recordPatience): across a cluster failover they
// wait for the new stream leader instead of giving completed work back to
// run again; the claim on the message and the attempt's lease are kept
// meanwhile. It ends early when the claim is lost or a shutdown runs out
// of drain time: the redelivery then finds whatever was stored.
func (r *Runtime) conclude(st *attemptState, end *ending, outcome schemas.Outcome, qseq uint64) error {
	// Patience ends with the claim, or at a hard shutdown.
	held, release := st.delivery.HoldContext()
	defer release()
	ev := r.outcomeEvent(st, *end, outcome, qseq)
	// One patient write: the output first (a success's), then the record;
	// a try after a failover does not store the output again.
	kept := outcome != schemas.OutcomeSucceeded
	var final *schemas.OutcomeEvent
	var won bool
	err := patiently(held, recordPatience, func(ctx context.Context) (err error) {
		if !kept {
			if err = r.outcomes.keepOutput(ctx, ev, end.output); err != nil {
				return err
			}
			kept = true
		}
		final, won, err = r.outcomes.create(ctx, ev)
		return err
	})
	switch {
	case err != nil && !kept:
		st.log.Error().Err(err).Msg("persona output not stored; message will be redelivered")
		return err
	case err != nil:
		st.log.Error().Err(err).Msg("terminal record not stored; message will be redelivered")
		return err
	}
	end.final = final
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

// outcomeKey identifies the request a record belongs to: its request id
// (read from the raw bytes when the request did not decode), or else
// where it was stored.
func outcomeKey(st *attemptState) string {
	switch {
	case st.req != nil:
		return st.req.RequestID
	case st.rawID != "":
		return st.rawID
	}
	return st.delivery.Stream + "." + strconv.FormatUint(st.delivery.Sequence, 10)
}

func (r *Runtime) outcomeEvent(st *attemptState, end ending, outcome schemas.Outcome, qseq uint64) *schemas.OutcomeEvent {
	ev := &schemas.OutcomeEvent{
		SchemaVersion: schemas.Version, Outcome: outcome, Persona: st.persona.name,
		Reason: end.decision.Reason, Detail: end.decision.Detail, Attempts: st.attempt.Number,
		Agent: st.attempt.Agent, CorrelationID: st.corrID, QuarantineSeq: qseq,
		DurationMs: r.now().Sub(st.started).Milliseconds(), At: r.now().UTC(), LastError: st.attempt.Error,
		RequestID: outcomeKey(st), TaskID: "unknown", Step: "unknown",
	}
	if end.stored != nil {
		ev.Reason, ev.Attempts, ev.Detail = end.stored.Reason, end.stored.Attempts, end.stored.Detail
	}
	ev.Blocked = end.decision.Blocked || ev.Reason == schemas.ReasonExhausted || ev.Reason == schemas.ReasonTerminal
	if st.req != nil {
		ev.TaskID, ev.Step, ev.SubmittedAt = st.req.TaskID, st.req.Step, st.req.CreatedAt.UTC()
		ev.RequestDigest = schemas.RequestDigest(st.req) // a resubmit with other content is a conflict
		if from := runStart(st); !from.IsZero() {
			ev.DurationMs = max(ev.At.Sub(from).Milliseconds(), 0) // submit to end, retries included
		}
	}
	if p := st.attempt.Progress; p.Known() {
		ev.Progress = &schemas.Progress{Completed: p.Completed, Total: p.Total}
	}
	ev.Usage = st.spent().Record()
	if end.stored != nil { // quarantined by an earlier delivery: its record has the history
		ev.Usage = end.stored.Usage
	}
	return ev
}

// runStart is when the request's run began, for its duration: its
// created_at, or, for a replay (which keeps the original's payload and so
// its created_at), when the replay was published.
func runStart(st *attemptState) time.Time {
	if st.delivery.HeaderGet(schemas.HeaderReplayOf) != "" && !st.delivery.Published.IsZero() {
		return st.delivery.Published
	}
	return st.req.CreatedAt
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
