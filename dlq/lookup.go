package dlq

import (
	"context"
	"fmt"

	"github.com/personaq/personaq/schemas"
)

// Stored returns the record already stored under id, if any. The runtime
// asks before re-running a redelivered message, so a crash anywhere between
// "record published" and "source termed" never runs the handler again:
//
//   - the index names the record's sequence: the record is read there;
//   - the index holds only a reservation (a writer reserved the id, then
//     may have published and died before noting the sequence): the
//     quarantine stream is searched from the reservation on for a message
//     published with the id as its Nats-Msg-Id — within or past the
//     stream's duplicate window — and a record found is noted in the index;
//   - no entry: nothing was stored through the index (Put reserves the id
//     before it publishes).
func (w *Writer) Stored(ctx context.Context, id string) (*schemas.QuarantineRecord, uint64, error) {
	if w.idx == nil {
		return nil, 0, nil
	}
	e, err := w.idx.get(ctx, id)
	if err != nil || e == nil {
		return nil, 0, err
	}
	seq := e.Seq
	if seq == 0 {
		found, ok := w.find(ctx, id, w.everyRecord(), e.At)
		if !ok {
			return nil, 0, nil // reserved, never published
		}
		w.log.Warn().Str("record_id", id).Uint64("quarantine_seq", found).
			Msg("quarantine record found on the stream without its index entry (its writer died in between); index repaired")
		w.remember(ctx, id, indexEntry{Seq: found, FP: e.FP, At: w.now().UTC()})
		seq = found
	}
	return w.read(ctx, id, seq)
}

// read returns the record id stored at seq; nil when seq holds another.
func (w *Writer) read(ctx context.Context, id string, seq uint64) (*schemas.QuarantineRecord, uint64, error) {
	stream, err := w.js.StreamNameBySubject(ctx, w.everyRecord())
	if err != nil {
		return nil, 0, fmt.Errorf("quarantine stream: %w", err)
	}
	s, err := w.js.Stream(ctx, stream)
	if err != nil {
		return nil, 0, fmt.Errorf("quarantine stream %s: %w", stream, err)
	}
	raw, err := s.GetMsg(ctx, seq)
	if err != nil {
		return nil, 0, fmt.Errorf("quarantine record %s at seq %d: %w", id, seq, err)
	}
	rec, err := schemas.DecodeQuarantineRecord(raw.Data)
	if err != nil {
		return nil, 0, fmt.Errorf("quarantine record %s at seq %d: %w", id, seq, err)
	}
	if rec.ID != id {
		return nil, 0, nil // the index points at another record: treat as none
	}
	return rec, seq, nil
}
