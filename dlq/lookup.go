package dlq

import (
	"context"
	"fmt"

	"github.com/personaq/personaq/schemas"
)

// Stored returns the record already stored under id, if the index knows
// one. The runtime asks before re-running a redelivered message, so a crash
// between "record stored" and "source termed" never runs the handler again.
// A reservation (a write that may not have finished) is not a record.
func (w *Writer) Stored(ctx context.Context, id string) (*schemas.QuarantineRecord, uint64, error) {
	if w.idx == nil {
		return nil, 0, nil
	}
	e, err := w.idx.get(ctx, id)
	if err != nil || e == nil || e.Seq == 0 {
		return nil, 0, err
	}
	stream, err := w.js.StreamNameBySubject(ctx, w.subject("x", "x"))
	if err != nil {
		return nil, 0, fmt.Errorf("quarantine stream: %w", err)
	}
	s, err := w.js.Stream(ctx, stream)
	if err != nil {
		return nil, 0, err
	}
	raw, err := s.GetMsg(ctx, e.Seq)
	if err != nil {
		return nil, 0, fmt.Errorf("quarantine record %s at seq %d: %w", id, e.Seq, err)
	}
	rec, err := schemas.DecodeQuarantineRecord(raw.Data)
	if err != nil {
		return nil, 0, err
	}
	if rec.ID != id {
		return nil, 0, nil // the index points at another record: treat as none
	}
	return rec, e.Seq, nil
}
