package dlq

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/personaq/personaq/consumers/streams"
	"github.com/personaq/personaq/schemas"
)

// DefaultDuplicateWindow is JetStream's default Nats-Msg-Id window; set
// WithDuplicateWindow when the quarantine stream uses another.
const DefaultDuplicateWindow = 2 * time.Minute

// SubjectFunc maps a record's reason and persona to its subject.
type SubjectFunc func(reason, persona string) string

// Writer stores quarantine records, idempotently: a record id is stored
// once, whether N replicas write it at the same moment (JetStream drops
// the duplicates by Nats-Msg-Id) or a retry comes long after the stream's
// duplicate window (the KV index schemas.DefaultQuarantineIndexBucket
// remembers the id for defaultIndexTTL).
// A Writer is safe for concurrent use.
//
// A record that would not fit in one message — a request near the
// server's max_payload, huge headers, a long error history — keeps its
// payload (then its headers) in the object store bucket
// schemas.DefaultQuarantinePayloadBucket and references it, and its history is trimmed with
// a marker: any message the requests stream accepts can be quarantined.
type Writer struct {
	js        jetstream.JetStream
	subject   SubjectFunc
	idx       *index
	objects   *objects
	dupWindow time.Duration
	// leaderWait is how long a record write waits for the quarantine
	// stream to have a leader (0: nats.go's default, about half a second).
	leaderWait time.Duration
	log        zerolog.Logger
	now        func() time.Time
	maxRecord  int // tests: a smaller inline limit than the server's
	// published, a test hook (WithPublishedHook), runs between publishing
	// a record and noting it in the index.
	published func() error
}

// WriterOption configures a Writer.
type WriterOption func(*Writer)

// WithIndexReplicas sets the replicas and storage of the index bucket and
// of the payload object store. Default: 1, file.
func WithIndexReplicas(replicas int, storage jetstream.StorageType) WriterOption {
	return func(w *Writer) {
		if w.idx != nil {
			w.idx.replicas, w.idx.storage = replicas, storage
		}
		w.objects.replicas, w.objects.storage = replicas, storage
	}
}

// WithoutIndex turns the second dedup layer off: only the stream's
// Nats-Msg-Id window deduplicates.
func WithoutIndex() WriterOption { return func(w *Writer) { w.idx = nil } }

// WithLeaderWait makes a record write wait up to d for the quarantine
// stream to have a leader — a cluster failing over has none for a few
// seconds — instead of failing at once and giving the message back to run
// again.
func WithLeaderWait(d time.Duration) WriterOption {
	return func(w *Writer) { w.leaderWait = max(d, 0) }
}

// WithDuplicateWindow tells the writer the quarantine stream's duplicate
// window. Default: DefaultDuplicateWindow.
func WithDuplicateWindow(d time.Duration) WriterOption {
	return func(w *Writer) {
		if d > 0 {
			w.dupWindow = d
		}
	}
}

// WithPublishedHook calls fn after Put published a record and before the
// index notes its sequence; an error from fn ends Put there, wrapped in
// ErrWrite, with the index holding only the writer's reservation. It is a
// test hook: what a writer killed between the two steps leaves behind
// (Stored must still find the record). Default: none.
func WithPublishedHook(fn func() error) WriterOption {
	return func(w *Writer) { w.published = fn }
}

// WithWriterLogger logs duplicates skipped and index trouble. Default: none.
func WithWriterLogger(l *zerolog.Logger) WriterOption {
	return func(w *Writer) {
		if l != nil {
			w.log = *l
		}
	}
}

// NewWriter returns a Writer publishing records on subject(reason, persona).
func NewWriter(js jetstream.JetStream, subject SubjectFunc, opts ...WriterOption) *Writer {
	w := &Writer{
		js: js, subject: subject, dupWindow: DefaultDuplicateWindow, log: zerolog.Nop(), now: time.Now,
		idx:     &index{js: js, bucket: schemas.DefaultQuarantineIndexBucket, ttl: defaultIndexTTL, replicas: 1, storage: jetstream.FileStorage},
		objects: newObjects(js, schemas.DefaultQuarantinePayloadBucket),
	}
	for _, o := range opts {
		o(w)
	}
	return w
}

// RecordID is the deterministic id of the record for the message at seq of
// stream: every replica and every retry of the same failure computes the
// same id, and JetStream drops the duplicates.
func RecordID(stream string, seq uint64) string {
	return "q." + stream + "." + strconv.FormatUint(seq, 10)
}

// indexTimeout bounds each use of the KV index within one Put.
const indexTimeout = 2 * time.Second

// Put stores rec and waits for the server's acknowledgement. It returns the
// record's sequence on the quarantine stream and whether it was stored
// already (a duplicate). A record whose Lineage is unset gets it from the
// replay headers its message carries. rec holds the message as it was
// (headers and payload raw); what is published is fitted to one message
// (see Writer), rec itself is not changed.
//
// The index (second dedup layer) never makes Put fail: when it cannot be
// read or written, Put falls back to the Nats-Msg-Id window alone and logs.
func (w *Writer) Put(ctx context.Context, rec *schemas.QuarantineRecord) (uint64, bool, error) {
	fillLineage(rec)
	persona := rec.Persona
	if !schemas.ValidToken(persona) {
		persona = "" // a persona read from a broken payload: "_"
	}
	subject := w.subject(string(rec.Reason), persona)
	fp := fingerprint(rec.OriginalSubject, rec.Payload)
	// The index is a second layer: it gets a short deadline of its own so a
	// refused or slow KV call cannot use up the write's (and fall back to
	// Nats-Msg-Id dedup instead).
	ictx, cancel := context.WithTimeout(ctx, indexTimeout)
	seq, ok, msgID := w.seen(ictx, rec.ID, fp)
	cancel()
	if ok {
		w.log.Info().Str("record_id", rec.ID).Uint64("quarantine_seq", seq).Msg("quarantine record already stored (index); duplicate skipped")
		return seq, true, nil
	}
	out, data, err := w.prepare(ctx, rec, fp)
	if err != nil {
		return 0, false, fmt.Errorf("%w: record %s: %w", ErrWrite, rec.ID, err)
	}
	msg := &nats.Msg{Subject: subject, Data: data, Header: nats.Header{}}
	msg.Header.Set(jetstream.MsgIDHeader, msgID)
	msg.Header.Set(schemas.HeaderReason, string(out.Reason))
	msg.Header.Set(schemas.HeaderPersona, out.Persona)
	msg.Header.Set(schemas.HeaderTask, out.TaskID)
	if out.SagaID != "" {
		msg.Header.Set(schemas.HeaderSaga, out.SagaID)
	}
	ack, err := w.js.PublishMsg(ctx, msg, streams.WaitForLeader(w.leaderWait)...)
	if err != nil {
		return 0, false, fmt.Errorf("%w: record %s: %w", ErrWrite, rec.ID, err)
	}
	if w.published != nil {
		if err := w.published(); err != nil {
			return 0, false, fmt.Errorf("%w: record %s: %w", ErrWrite, rec.ID, err)
		}
	}
	ictx, cancel = context.WithTimeout(ctx, indexTimeout)
	defer cancel()
	w.remember(ictx, rec.ID, indexEntry{Seq: ack.Sequence, FP: fp, At: w.now().UTC()})
	return ack.Sequence, ack.Duplicate, nil
}

// seen consults the index: a stored entry for the same message is a
// duplicate. A reservation older than the duplicate window means a writer
// may have published and died before recording it: the quarantine stream
// is searched for the id from the reservation time on (under any reason:
// the record is one per message). Otherwise a fresh
// reservation is left for the next writer to find. It returns the
// Nats-Msg-Id to publish with: the record id, or — when the id was used
// for another message before (a requests stream recreated, its sequences
// starting over) — the id suffixed with the fingerprint, so JetStream does
// not take the new record for the old one.
func (w *Writer) seen(ctx context.Context, id, fp string) (uint64, bool, string) {
	if w.idx == nil {
		return 0, false, id
	}
	e, err := w.idx.get(ctx, id)
	if err != nil {
		w.log.Warn().Err(err).Str("record_id", id).Msg("quarantine index unavailable; relying on the stream's duplicate window")
		return 0, false, id
	}
	msgID := id
	switch {
	case e != nil && e.FP == fp && e.Seq > 0:
		return e.Seq, true, id
	case e != nil && e.FP == fp && w.now().Sub(e.At) > w.dupWindow:
		if seq, ok := w.find(ctx, id, w.everyRecord(), e.At); ok {
			w.remember(ctx, id, indexEntry{Seq: seq, FP: fp, At: w.now().UTC()})
			return seq, true, id
		}
	case e != nil && e.FP != fp:
		w.log.Warn().Str("record_id", id).Msg("record id used before for a different message (stream recreated?); storing a new record")
		msgID = id + "." + fp
	}
	w.remember(ctx, id, indexEntry{FP: fp, At: w.now().UTC()})
	return 0, false, msgID
}

// find looks for the record published with Nats-Msg-Id id (or, for an id
// used before for another message, id suffixed with a fingerprint) on the
// quarantine subjects matching filter since (about) at, reading headers
// only.
func (w *Writer) find(ctx context.Context, id, filter string, at time.Time) (uint64, bool) {
	stream, err := w.js.StreamNameBySubject(ctx, filter)
	if err != nil {
		w.log.Warn().Err(err).Str("record_id", id).Msg("quarantine index: no stream for an unconfirmed record's subject")
		return 0, false
	}
	var found uint64
	err = scan(ctx, w.js, scanOpts{stream: stream, subjects: []string{filter}, since: at.Add(-time.Second), headersOnly: true},
		func(m jetstream.Msg) (bool, error) {
			if got := m.Headers().Get(jetstream.MsgIDHeader); got == id || strings.HasPrefix(got, id+".") {
				found, _ = msgSeq(m)
				return false, nil
			}
			return true, nil
		})
	if err != nil {
		w.log.Warn().Err(err).Str("record_id", id).Msg("quarantine index: search for an unconfirmed record failed")
	}
	return found, found > 0
}

// everyRecord is the filter matching every quarantine record's subject.
func (w *Writer) everyRecord() string { return w.subject("*", "*") }

func (w *Writer) remember(ctx context.Context, id string, e indexEntry) {
	if w.idx == nil {
		return
	}
	if err := w.idx.put(ctx, id, e); err != nil {
		w.log.Warn().Err(err).Str("record_id", id).Msg("quarantine index not updated; relying on the stream's duplicate window")
	}
}

// fillLineage derives a record's lineage from the replay headers of the
// message it keeps, when the caller did not set it.
func fillLineage(rec *schemas.QuarantineRecord) {
	if rec.Lineage != nil {
		return
	}
	h := nats.Header(rec.Headers)
	of := h.Get(schemas.HeaderReplayOf)
	if of == "" {
		return
	}
	n, _ := strconv.Atoi(h.Get(schemas.HeaderReplayCount))
	rec.Lineage = &schemas.Lineage{ReplayOf: of, ReplayCount: max(n, 0), OriginalRequestID: h.Get(schemas.HeaderOriginalRequestID)}
}
