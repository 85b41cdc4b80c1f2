package consumers

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/personaq/personaq/consumers/loop"
	"github.com/personaq/personaq/consumers/wire"
	"github.com/personaq/personaq/dlq"
	"github.com/personaq/personaq/schemas"
)

// DefaultUnknownPersonaGrace is how long a request for a persona that no
// replica serves waits before it is quarantined as unknown_persona.
const DefaultUnknownPersonaGrace = 5 * time.Minute

// sweepUnknown quarantines, every interval, the requests that waited past
// the grace period on a subject no replica serves. Records are idempotent,
// so every replica may sweep.
func (r *Runtime) sweepUnknown(ctx context.Context, grace time.Duration) {
	loop.Every(ctx, min(max(grace/4, time.Second), 30*time.Second), func() {
		if err := r.quarantineUnknown(ctx, grace); err != nil && ctx.Err() == nil {
			r.log.Warn().Err(err).Msg("unknown-persona sweep failed; will try again")
		}
	})
}

func (r *Runtime) quarantineUnknown(ctx context.Context, grace time.Duration) error {
	unserved, err := wire.UnservedRequests(ctx, r.js, r.topo)
	if err != nil {
		return err
	}
	s, err := r.js.Stream(ctx, r.topo.RequestsStream)
	if err != nil {
		return err
	}
	var errs []error
	for _, u := range unserved {
		errs = append(errs, r.quarantineSubject(ctx, s, u, grace))
	}
	return errors.Join(errs...)
}

// quarantineSubject moves the subject's requests older than grace to the
// quarantine, oldest first: record stored, then the request removed.
func (r *Runtime) quarantineSubject(ctx context.Context, s jetstream.Stream, u wire.Unserved, grace time.Duration) error {
	for seq := uint64(1); ; {
		raw, err := s.GetMsg(ctx, seq, jetstream.WithGetMsgSubject(u.Subject))
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("read %s: %w", u.Subject, err)
		}
		if r.now().Sub(raw.Time) < grace {
			return nil // the rest are newer
		}
		if err := r.quarantineUnserved(ctx, s, raw, u.Persona, grace); err != nil {
			return err
		}
		seq = raw.Sequence + 1
	}
}

func (r *Runtime) quarantineUnserved(ctx context.Context, s jetstream.Stream, raw *jetstream.RawStreamMsg, persona string, grace time.Duration) error {
	rec := &schemas.QuarantineRecord{
		SchemaVersion: schemas.Version, ID: dlq.RecordID(r.topo.RequestsStream, raw.Sequence),
		Reason:          schemas.ReasonUnknownPersona,
		Detail:          fmt.Sprintf("no replica serves persona %q; the request waited %s (grace %s)", persona, r.now().Sub(raw.Time).Round(time.Second), grace),
		OriginalSubject: raw.Subject, Headers: map[string][]string(raw.Header), Payload: raw.Data,
		Stream: r.topo.RequestsStream, Sequence: raw.Sequence, Persona: persona, QuarantinedAt: r.now().UTC(),
	}
	req, decodeErr := schemas.DecodeRequest(raw.Data)
	if decodeErr == nil {
		rec.RequestID, rec.TaskID, rec.Step, rec.CorrelationID = req.RequestID, req.TaskID, req.Step, req.CorrelationID
	}
	qseq, _, err := r.dlq.Put(ctx, rec)
	if err != nil {
		return fmt.Errorf("quarantine unserved request seq %d: %w", raw.Sequence, err)
	}
	if decodeErr == nil {
		ev := &schemas.OutcomeEvent{
			SchemaVersion: schemas.Version, RequestID: req.RequestID, TaskID: req.TaskID, Step: req.Step, Persona: persona,
			Outcome: schemas.OutcomeQuarantined, Reason: schemas.ReasonUnknownPersona, Detail: rec.Detail, Blocked: true,
			QuarantineSeq: qseq, CorrelationID: req.CorrelationID, SubmittedAt: req.CreatedAt.UTC(), At: r.now().UTC(),
			RequestDigest: schemas.RequestDigest(req),
		}
		if _, _, err := r.outcomes.create(ctx, ev); err != nil {
			return err
		}
	}
	if err := s.DeleteMsg(ctx, raw.Sequence); err != nil && !errors.Is(err, jetstream.ErrMsgNotFound) {
		return fmt.Errorf("remove unserved request seq %d: %w", raw.Sequence, err)
	}
	r.log.Warn().Str("persona", persona).Uint64("stream_seq", raw.Sequence).Uint64("quarantine_seq", qseq).
		Str("request_id", rec.RequestID).Str("task_id", rec.TaskID).Msg("Request for a persona no replica serves quarantined")
	return nil
}
