package saga

import (
	"context"
	"fmt"

	"github.com/personaq/personaq/dlq"
	"github.com/personaq/personaq/retry"
	"github.com/personaq/personaq/schemas"
)

// reject quarantines an invalid compensation message as invalid_message
// (payload intact) and terms it; if the record cannot be written the
// message comes back.
func (q *queue) reject(ctx context.Context, m *delivery, seq uint64, detail string) outcome {
	now := q.r.now().UTC()
	stream := q.r.topo.Stream
	rec := &schemas.QuarantineRecord{
		SchemaVersion: schemas.Version, ID: dlq.RecordID(stream, seq), Reason: schemas.ReasonInvalidMessage,
		Detail: detail, OriginalSubject: m.Subject(), Headers: map[string][]string(m.Headers()), Payload: m.Data(),
		Stream: stream, Sequence: seq, SagaID: m.Headers().Get(schemas.HeaderSaga), QuarantinedAt: now,
		Errors: []schemas.AttemptRecord{retry.Attempt{Class: retry.ClassInvalidMessage, Error: detail, At: now}.Record()},
	}
	if rec.Payload == nil {
		rec.Payload = []byte{}
	}
	qseq, _, err := q.r.w.Put(ctx, rec)
	if err != nil {
		q.later(m, rec.SagaID, err)
		return outcome{failure: fmt.Sprintf("compensation message %s seq %d: invalid and not quarantined yet (retried on redelivery): %v", stream, seq, err)}
	}
	_ = m.term("invalid compensation message; quarantined as invalid_message")
	q.r.log.Warn().Str("stream", stream).Uint64("stream_seq", seq).Uint64("quarantine_seq", qseq).Str("detail", detail).Msg("invalid compensation message quarantined")
	return outcome{failure: fmt.Sprintf("compensation message %s seq %d: quarantined as invalid_message (quarantine seq %d): %s", stream, seq, qseq, detail)}
}

// writeRecord stores the compensation_failed record of a quarantined saga,
// with its attempt history, and notes its sequence in the saga. The record
// id is fixed per saga and request, so writing it again stores one record.
func (q *queue) writeRecord(ctx context.Context, sg *Saga) error {
	req := sg.Request
	if req == nil {
		req = &schemas.CompensationRequest{SagaID: sg.ID, Kind: sg.Kind, Target: sg.Target}
	}
	rec := &schemas.QuarantineRecord{
		SchemaVersion: schemas.Version, ID: recordID(sg.ID, req.RequestID), Reason: schemas.ReasonCompensationFailed,
		Detail: sg.TerminalReason + fmt.Sprintf("; saga %s is parked as QUARANTINED: nothing was recorded as compensated, "+
			"a person must finish or undo %s %s by hand (or fix the cause and replay this record)", sg.ID, sg.Kind, sg.Target),
		OriginalSubject: q.r.topo.Subject(sg.Kind), Headers: sg.Headers, Payload: sg.Payload,
		Stream: sg.SourceStream, Sequence: sg.SourceSeq, Attempts: sg.Attempts, Errors: sg.Errors,
		RequestID: req.RequestID, TaskID: req.TaskID, SagaID: sg.ID, CorrelationID: req.CorrelationID,
		QuarantinedAt: q.r.now().UTC(),
	}
	if rec.Payload == nil {
		if data, err := schemas.Encode(req); err == nil {
			rec.Payload = data
		} else {
			rec.Payload = []byte{}
		}
	}
	if n := len(sg.Errors); n > 0 {
		rec.FirstFailureAt, rec.LastFailureAt = sg.Errors[0].At, sg.Errors[n-1].At
	}
	qseq, _, err := q.r.w.Put(ctx, rec)
	if err != nil {
		return err
	}
	next := *sg
	next.QuarantineSeq = qseq
	if err := update(ctx, q.kv, sg, &next); err != nil {
		q.r.log.Warn().Err(err).Str("saga_id", sg.ID).Msg("quarantine seq not noted in the saga; the record is stored")
	}
	return nil
}
