package consumers

import (
	"context"
	"errors"

	"github.com/personaq/personaq/retry"
	"github.com/personaq/personaq/schemas"
)

// cancelledBefore is the stage after decode: a request this replica knows
// was cancelled is settled as its record says (termed), without running.
// A first delivery of a message published before what the replica's
// memory of cancels covers looks its record up (a read); redeliveries do in
// begin.
func (r *Runtime) cancelledBefore(ctx context.Context, st *attemptState) (ending, bool) {
	rec, lookup := r.cancels.known(st.req.RequestID, st.delivery.Published)
	if rec != nil {
		st.log.Info().Str("request_id", st.req.RequestID).Str("cancelled_by", rec.CancelledBy).
			Msg("request cancelled before it ran; settled without running the handler")
		return settledBy(rec), true
	}
	if !lookup || st.delivery.Delivered > 1 {
		return ending{}, false
	}
	return r.settledByRecord(ctx, st)
}

// cancelledWhileRunning ends an attempt its request's cancel stopped: not a
// failure (uncounted, never quarantined), settled as the cancelled record
// (commit reads it when the watch forgot it meanwhile, and reports the
// attempt).
func (r *Runtime) cancelledWhileRunning(ctx context.Context, st *attemptState) (ending, bool) {
	if !errors.Is(context.Cause(ctx), ErrCancelled) {
		return ending{}, false
	}
	rec := r.cancels.cancelled(st.req.RequestID)
	st.attempt.Class = retry.ClassSnooze
	e := st.log.Info().Int("attempt", st.attempt.Number).Dur("duration", r.now().Sub(st.attempt.At))
	if rec != nil {
		e = e.Str("cancelled_by", rec.CancelledBy).Str("reason", rec.Detail)
	}
	e.Msg("attempt stopped: its request was cancelled; recorded as cancelled, not as a failure")
	return ending{verdict: verdictSettled, final: rec, effects: effects{cancelled: true}}, true
}

// attemptCancelled reports an attempt a cancel stopped.
func (r *Runtime) attemptCancelled(st *attemptState) {
	if r.cfg.NoAttemptEvents {
		return
	}
	ev := r.attemptEvent(st, schemas.AttemptCancelled)
	ev.DurationMs = r.now().Sub(st.attempt.At).Milliseconds()
	r.publishAttempt(st, ev)
}

// cancelledRetry turns a retry of a request cancelled meanwhile into its
// settle: no further attempt, the message termed at once.
func (r *Runtime) cancelledRetry(st *attemptState, end *ending) bool {
	if st.req == nil || (end.verdict != verdictRetry && end.verdict != verdictRelease) {
		return false
	}
	rec := r.cancels.cancelled(st.req.RequestID)
	if rec == nil {
		return false
	}
	end.verdict, end.final = verdictSettled, rec
	return true
}
