package dlq

import (
	"context"
	"fmt"
	"strconv"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/personaq/personaq/schemas"
)

// Headers set on every quarantine record message, so consumers can filter
// without decoding.
const (
	HeaderReason  = "Personaq-Reason"
	HeaderPersona = "Personaq-Persona"
	HeaderTask    = "Personaq-Task"
)

// SubjectFunc maps a record's reason and persona to its subject.
type SubjectFunc func(reason, persona string) string

// Writer stores quarantine records.
type Writer struct {
	js      jetstream.JetStream
	subject SubjectFunc
}

// NewWriter returns a Writer publishing records on subject(reason, persona).
func NewWriter(js jetstream.JetStream, subject SubjectFunc) *Writer {
	return &Writer{js: js, subject: subject}
}

// RecordID is the deterministic id of the record for the message at seq of
// stream: every replica and every retry of the same failure computes the
// same id, and JetStream drops the duplicates.
func RecordID(stream string, seq uint64) string {
	return "q." + stream + "." + strconv.FormatUint(seq, 10)
}

// Put stores rec and waits for the server's acknowledgement. It returns the
// record's sequence on the quarantine stream and whether the server had it
// already (a duplicate).
func (w *Writer) Put(ctx context.Context, rec *schemas.QuarantineRecord) (uint64, bool, error) {
	data, err := schemas.Encode(rec)
	if err != nil {
		return 0, false, fmt.Errorf("%w: encode record %s: %w", ErrWrite, rec.ID, err)
	}
	msg := &nats.Msg{
		Subject: w.subject(string(rec.Reason), rec.Persona),
		Data:    data,
		Header:  nats.Header{},
	}
	msg.Header.Set(jetstream.MsgIDHeader, rec.ID)
	msg.Header.Set(HeaderReason, string(rec.Reason))
	msg.Header.Set(HeaderPersona, rec.Persona)
	msg.Header.Set(HeaderTask, rec.TaskID)
	ack, err := w.js.PublishMsg(ctx, msg)
	if err != nil {
		return 0, false, fmt.Errorf("%w: record %s: %w", ErrWrite, rec.ID, err)
	}
	return ack.Sequence, ack.Duplicate, nil
}
