package consumers

import (
	"context"
	"strconv"
	"time"

	"github.com/personaq/personaq/schemas"
)

// concludeCaptured stores the terminal record of a request the
// max-deliveries listener quarantined (the listener's Conclude hook), so
// that it ends like every other request: one create-once record a waiting
// caller and `result` find. A record already standing (the request ended
// before its message was given up on) is kept.
func (r *Runtime) concludeCaptured(ctx context.Context, rec *schemas.QuarantineRecord, qseq uint64) error {
	ev := capturedOutcome(rec, qseq, r.now().UTC())
	final, won, err := r.outcomes.create(ctx, ev)
	if err != nil {
		return err
	}
	if won {
		r.obs.Outcome(ev.Persona, final.Outcome, final.Reason)
		return nil
	}
	if final.Outcome != ev.Outcome || final.Reason != ev.Reason {
		r.log.Warn().Str("request_id", ev.RequestID).Uint64("quarantine_seq", qseq).
			Str("recorded_outcome", string(final.Outcome)).Str("recorded_reason", string(final.Reason)).
			Msg("max_deliveries capture of a request that already has a terminal record; the record stands")
	}
	return nil
}

// capturedOutcome is the terminal record of a max_deliveries capture. A
// payload that does not decode is keyed by where it was stored, as the
// pipeline keys one (outcomeKey).
func capturedOutcome(rec *schemas.QuarantineRecord, qseq uint64, now time.Time) *schemas.OutcomeEvent {
	ev := &schemas.OutcomeEvent{
		SchemaVersion: schemas.Version, RequestID: rec.RequestID, TaskID: rec.TaskID, Step: rec.Step,
		Persona: rec.Persona, Outcome: schemas.OutcomeQuarantined, Reason: schemas.ReasonMaxDeliveries,
		Detail: rec.Detail, Attempts: rec.Attempts, CorrelationID: rec.CorrelationID, QuarantineSeq: qseq,
		At: now, Usage: rec.Usage,
	}
	if n := len(rec.Errors); n > 0 {
		ev.LastError = rec.Errors[n-1].Error
	}
	if req, err := schemas.DecodeRequest(rec.Payload); err == nil {
		ev.RequestID, ev.TaskID, ev.Step, ev.CorrelationID = req.RequestID, req.TaskID, req.Step, req.CorrelationID
		if !req.CreatedAt.IsZero() {
			ev.SubmittedAt = req.CreatedAt.UTC()
			ev.DurationMs = max(now.Sub(req.CreatedAt).Milliseconds(), 0)
		}
	}
	if ev.RequestID == "" {
		ev.RequestID = rec.Stream + "." + strconv.FormatUint(rec.Sequence, 10)
	}
	if ev.TaskID == "" {
		ev.TaskID = "unknown"
	}
	if ev.Step == "" {
		ev.Step = "unknown"
	}
	return ev
}
