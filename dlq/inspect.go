package dlq

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/otel/trace"

	"github.com/personaq/personaq/consumers/streams"
	"github.com/personaq/personaq/schemas"
)

// InspectorConfig configures an Inspector.
type InspectorConfig struct {
	// JetStream client. Required.
	JetStream jetstream.JetStream
	// Stream is the quarantine stream. Default: schemas.DefaultQuarantineStream.
	Stream string
	// Prefix of record subjects (<prefix>.<reason>.<persona>).
	// Default: schemas.DefaultQuarantinePrefix.
	Prefix string
	// IndexBucket is the KV bucket Replay remembers published replays in
	// (the writer's index). Default: schemas.DefaultQuarantineIndexBucket; "-" turns it off.
	IndexBucket string
	// PayloadBucket is the object store of payloads kept out of line (a
	// record names its own bucket; this one is for records that do not).
	// Default: schemas.DefaultQuarantinePayloadBucket.
	PayloadBucket string
	// Now is the clock. Default: time.Now.
	Now func() time.Time
	// TracerProvider makes the send span of each replay. Default: the
	// global provider (otel.GetTracerProvider).
	TracerProvider trace.TracerProvider
}

// Inspector browses, replays and purges the quarantine. Every method takes
// a context first; a missing quarantine stream is ErrStreamMissing.
type Inspector struct {
	cfg     InspectorConfig
	js      jetstream.JetStream
	idx     *index
	objects *objects
}

// NewInspector validates cfg and returns an Inspector.
func NewInspector(cfg InspectorConfig) (*Inspector, error) {
	if cfg.JetStream == nil {
		return nil, fmt.Errorf("%w: jetstream: required", ErrInvalidConfig)
	}
	if cfg.Stream == "" {
		cfg.Stream = schemas.DefaultQuarantineStream
	}
	if cfg.Prefix == "" {
		cfg.Prefix = schemas.DefaultQuarantinePrefix
	}
	if cfg.IndexBucket == "" {
		cfg.IndexBucket = schemas.DefaultQuarantineIndexBucket
	}
	if cfg.PayloadBucket == "" {
		cfg.PayloadBucket = schemas.DefaultQuarantinePayloadBucket
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	i := &Inspector{cfg: cfg, js: cfg.JetStream, objects: newObjects(cfg.JetStream, cfg.PayloadBucket)}
	if cfg.IndexBucket != "-" {
		i.idx = &index{js: cfg.JetStream, bucket: cfg.IndexBucket, ttl: defaultIndexTTL, replicas: 1, storage: jetstream.FileStorage}
	}
	return i, nil
}

// Stream is the name of the quarantine stream the inspector reads.
func (i *Inspector) Stream() string { return i.cfg.Stream }

// Filter selects records. Zero fields select everything.
type Filter struct {
	// Reasons keeps records with any of these reasons.
	Reasons []schemas.Reason
	// Persona keeps one persona's records ("_" for records without one).
	Persona string
	// Personas keeps the records of any of these personas (with Persona).
	Personas []string
	// Task keeps one task's records.
	Task string
	// Tasks keeps the records of any of these tasks (with Task).
	Tasks []string
	// Since keeps records stored at or after this time.
	Since time.Time
	// Limit keeps the newest Limit records; 0 keeps all.
	Limit int
}

// Validate names the first bad field, wrapped in ErrInvalidFilter.
func (f Filter) Validate() error {
	for _, r := range f.Reasons {
		if !slices.Contains(schemas.Reasons, r) {
			return fmt.Errorf("%w: reason %q (known: %s)", ErrInvalidFilter, r, reasonList())
		}
	}
	for _, p := range f.personas() {
		if !schemas.ValidSubjectToken(p) {
			return fmt.Errorf("%w: persona %q is not a subject token", ErrInvalidFilter, p)
		}
	}
	if f.Limit < 0 {
		return fmt.Errorf("%w: limit %d must not be negative", ErrInvalidFilter, f.Limit)
	}
	return nil
}

func reasonList() string {
	names := make([]string, len(schemas.Reasons))
	for i, r := range schemas.Reasons {
		names[i] = string(r)
	}
	return strings.Join(names, ", ")
}

// personas is every persona f keeps (none: all).
func (f Filter) personas() []string { return union(f.Persona, f.Personas) }

// tasks is every task f keeps (none: all).
func (f Filter) tasks() []string { return union(f.Task, f.Tasks) }

// keepsTask reports whether f keeps records of task.
func (f Filter) keepsTask(task string) bool {
	tasks := f.tasks()
	return len(tasks) == 0 || slices.Contains(tasks, task)
}

// union is one and more, without empties and repeats.
func union(one string, more []string) []string {
	var out []string
	for _, v := range append([]string{one}, more...) {
		if v != "" && !slices.Contains(out, v) {
			out = append(out, v)
		}
	}
	return out
}

// subjects turns the reason and persona filters into subject filters.
func (i *Inspector) subjects(f Filter) []string {
	personas := f.personas()
	if len(personas) == 0 {
		personas = []string{"*"}
	}
	reasons := make([]string, 0, len(f.Reasons))
	for _, r := range f.Reasons {
		reasons = append(reasons, string(r))
	}
	if len(reasons) == 0 {
		if personas[0] == "*" {
			return []string{i.cfg.Prefix + ".>"}
		}
		reasons = []string{"*"}
	}
	var out []string
	for _, r := range reasons {
		for _, p := range personas {
			if s := i.cfg.Prefix + "." + r + "." + p; !slices.Contains(out, s) {
				out = append(out, s)
			}
		}
	}
	return out
}

// Entry is one record as stored on the quarantine stream.
type Entry struct {
	// Seq is the record's sequence on the quarantine stream.
	Seq      uint64    `json:"seq"`
	Subject  string    `json:"subject"`
	StoredAt time.Time `json:"stored_at"`
	// Size is the stored record's length in bytes.
	Size   int                       `json:"size"`
	Record *schemas.QuarantineRecord `json:"record,omitempty"`
	// Err is set when the stored bytes are not a valid record.
	Err string `json:"error,omitempty"`
}

func newEntry(seq uint64, subject string, at time.Time, data []byte) Entry {
	e := Entry{Seq: seq, Subject: subject, StoredAt: at.UTC(), Size: len(data)}
	rec, err := schemas.DecodeQuarantineRecord(data)
	if err != nil {
		e.Err = err.Error()
	} else {
		e.Record = rec
	}
	return e
}

// Reason is the entry's reason, from the record or else its subject.
func (e Entry) Reason() schemas.Reason {
	if e.Record != nil {
		return e.Record.Reason
	}
	parts := strings.Split(e.Subject, ".")
	if len(parts) >= 2 {
		return schemas.Reason(parts[len(parts)-2])
	}
	return ""
}

// List returns the records f selects, newest first. It reads the stream
// from f.Since (or its start) with an ephemeral consumer filtered on the
// reason and persona subjects; the task is matched on the record header.
func (i *Inspector) List(ctx context.Context, f Filter) ([]Entry, error) {
	if err := f.Validate(); err != nil {
		return nil, err
	}
	out := []Entry{}
	err := scan(ctx, i.js, scanOpts{stream: i.cfg.Stream, subjects: i.subjects(f), since: f.Since},
		func(m jetstream.Msg) (bool, error) {
			if !f.keepsTask(m.Headers().Get(schemas.HeaderTask)) {
				return true, nil
			}
			seq, at := msgSeq(m)
			e := newEntry(seq, m.Subject(), at, m.Data())
			if e.Record != nil && !f.keepsTask(e.Record.TaskID) {
				return true, nil
			}
			out = append(out, e)
			if f.Limit > 0 && len(out) > 2*f.Limit { // keep memory bounded
				out = slices.Delete(out, 0, len(out)-f.Limit)
			}
			return true, nil
		})
	if err != nil {
		return nil, err
	}
	if f.Limit > 0 && len(out) > f.Limit {
		out = out[len(out)-f.Limit:]
	}
	slices.Reverse(out)
	return out, nil
}

// Count returns how many records f selects (ignoring f.Limit).
func (i *Inspector) Count(ctx context.Context, f Filter) (int, error) {
	f.Limit = 0
	if len(f.tasks()) == 0 && f.Since.IsZero() {
		return i.countSubjects(ctx, f)
	}
	all, err := i.List(ctx, f)
	return len(all), err
}

func (i *Inspector) countSubjects(ctx context.Context, f Filter) (int, error) {
	if err := f.Validate(); err != nil {
		return 0, err
	}
	s, err := i.stream(ctx)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, subj := range i.subjects(f) {
		info, err := s.Info(ctx, jetstream.WithSubjectFilter(subj))
		if err != nil {
			return 0, streamErr(i.cfg.Stream, err)
		}
		for _, c := range info.State.Subjects {
			n += int(c)
		}
	}
	return n, nil
}

// Get returns the record at seq; ErrNotFound when there is none.
func (i *Inspector) Get(ctx context.Context, seq uint64) (*Entry, error) {
	s, err := i.stream(ctx)
	if err != nil {
		return nil, err
	}
	raw, err := s.GetMsg(ctx, seq)
	if errors.Is(err, jetstream.ErrMsgNotFound) || (err == nil && !strings.HasPrefix(raw.Subject, i.cfg.Prefix+".")) {
		return nil, fmt.Errorf("%w: seq %d in %s", ErrNotFound, seq, i.cfg.Stream)
	}
	if err != nil {
		return nil, fmt.Errorf("read %s seq %d: %w", i.cfg.Stream, seq, err)
	}
	e := newEntry(raw.Sequence, raw.Subject, raw.Time, raw.Data)
	return &e, nil
}

// Selection names records: explicit sequences, or else a filter.
type Selection struct {
	Seqs   []uint64
	Filter Filter
}

// Select returns the selected entries: the named sequences in the order
// given, each once however often it is named (every one must exist:
// ErrNotFound names the first that does not), or the filter's records
// newest first.
func (i *Inspector) Select(ctx context.Context, sel Selection) ([]Entry, error) {
	if len(sel.Seqs) == 0 {
		return i.List(ctx, sel.Filter)
	}
	out := make([]Entry, 0, len(sel.Seqs))
	seen := make(map[uint64]bool, len(sel.Seqs))
	for _, seq := range sel.Seqs {
		if seen[seq] {
			continue
		}
		seen[seq] = true
		e, err := i.Get(ctx, seq)
		if err != nil {
			return nil, err
		}
		out = append(out, *e)
	}
	return out, nil
}

// Message returns the message rec keeps, as it was published: its
// original subject, its headers byte for byte (HeaderBase64Prefix
// decoded) and its payload, read back from the object store when the
// record keeps it out of line (size and digest checked: ErrPayloadMissing,
// ErrPayloadCorrupt).
func (i *Inspector) Message(ctx context.Context, rec *schemas.QuarantineRecord) (*nats.Msg, error) {
	data := rec.Payload
	if rec.PayloadRef != nil {
		var err error
		if data, err = i.objects.get(ctx, rec.PayloadRef); err != nil {
			return nil, fmt.Errorf("record %s payload: %w", rec.ID, err)
		}
	}
	stored := rec.Headers
	if rec.HeadersRef != nil {
		raw, err := i.objects.get(ctx, rec.HeadersRef)
		if err != nil {
			return nil, fmt.Errorf("record %s headers: %w", rec.ID, err)
		}
		if err := json.Unmarshal(raw, &stored); err != nil {
			return nil, fmt.Errorf("record %s headers: %w: %w", rec.ID, ErrPayloadCorrupt, err)
		}
	}
	h, err := decodeHeaders(stored)
	if err != nil {
		return nil, fmt.Errorf("record %s: %w", rec.ID, err)
	}
	return &nats.Msg{Subject: rec.OriginalSubject, Header: h, Data: data}, nil
}

// remove deletes a record: first the objects it keeps out of line, then
// the record, so that a failure half way leaves a record a second purge
// finishes, never an object nobody references.
func (i *Inspector) remove(ctx context.Context, s jetstream.Stream, e Entry) error {
	if e.Record != nil {
		for _, ref := range []*schemas.PayloadRef{e.Record.PayloadRef, e.Record.HeadersRef} {
			if ref == nil {
				continue
			}
			if err := i.objects.delete(ctx, ref); err != nil {
				return fmt.Errorf("record kept: %w", err)
			}
		}
	}
	return streams.DeleteMsg(ctx, s, e.Seq)
}

func (i *Inspector) stream(ctx context.Context) (jetstream.Stream, error) {
	s, err := i.js.Stream(ctx, i.cfg.Stream)
	if err != nil {
		return nil, streamErr(i.cfg.Stream, err)
	}
	return s, nil
}

// Stats summarises the quarantine.
type Stats struct {
	Stream string `json:"stream"`
	Total  uint64 `json:"total"`
	Bytes  uint64 `json:"bytes"`
	// ByReason and ByPersona count records by subject ("_": no persona).
	ByReason  map[string]uint64 `json:"by_reason"`
	ByPersona map[string]uint64 `json:"by_persona"`
	FirstSeq  uint64            `json:"first_seq,omitempty"`
	LastSeq   uint64            `json:"last_seq,omitempty"`
	// Oldest is when the oldest record was stored; OldestAge is its age.
	Oldest    time.Time     `json:"oldest,omitzero"`
	OldestAge time.Duration `json:"oldest_age_ns,omitempty"`
	// PayloadBytes is what the object store holds for records that keep
	// their payload or headers out of line (not counted in Bytes).
	PayloadBytes uint64 `json:"payload_bytes,omitempty"`
	// CaptureFailing lists crash-looping messages the max-deliveries
	// listener could not move here yet (they wait in their stream).
	CaptureFailing []CaptureFailure `json:"capture_failing,omitempty"`
}

// Stats counts records by reason and persona from the stream's subject
// counts (nothing is read or decoded), with the total, bytes and the age
// of the oldest record, and lists the captures that keep failing (from the
// index bucket).
func (i *Inspector) Stats(ctx context.Context) (*Stats, error) {
	s, err := i.stream(ctx)
	if err != nil {
		return nil, err
	}
	info, err := s.Info(ctx, jetstream.WithSubjectFilter(i.cfg.Prefix+".>"))
	if err != nil {
		return nil, streamErr(i.cfg.Stream, err)
	}
	st := &Stats{Stream: i.cfg.Stream, Total: info.State.Msgs, Bytes: info.State.Bytes,
		ByReason: map[string]uint64{}, ByPersona: map[string]uint64{}}
	for subj, n := range info.State.Subjects {
		rest := strings.TrimPrefix(subj, i.cfg.Prefix+".")
		reason, persona, _ := strings.Cut(rest, ".")
		st.ByReason[reason] += n
		st.ByPersona[persona] += n
	}
	if st.Total > 0 {
		st.FirstSeq, st.LastSeq = info.State.FirstSeq, info.State.LastSeq
		st.Oldest = info.State.FirstTime.UTC()
		st.OldestAge = i.cfg.Now().Sub(info.State.FirstTime)
	}
	if st.PayloadBytes, err = i.objects.size(ctx); err != nil {
		return nil, err
	}
	if i.idx != nil {
		if st.CaptureFailing, err = i.idx.captureFailures(ctx); err != nil {
			return nil, err
		}
	}
	return st, nil
}
