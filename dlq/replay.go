package dlq

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/otel/codes"
	"golang.org/x/time/rate"

	"github.com/personaq/personaq/schemas"
)

// ReplayOptions tune Replay.
type ReplayOptions struct {
	// Keep leaves the records in the quarantine after replaying them.
	Keep bool
	// DryRun reports what would be done and does nothing.
	DryRun bool
	// KeepDeadline carries the original request's step deadline into its
	// replay. Default: false, a fresh step budget of the original's length
	// from the replay (see ReplayItem.Deadline).
	KeepDeadline bool
	// Rate caps replays per second; 0 means no cap.
	Rate float64
	// Progress, when set, is called after each record with the count done
	// and the total.
	Progress func(done, total int)
}

// ReplayItem is what happened to one record.
type ReplayItem struct {
	Seq      uint64         `json:"seq"`
	RecordID string         `json:"record_id,omitempty"`
	Reason   schemas.Reason `json:"reason,omitempty"`
	// Subject is where the payload was (or would be) republished.
	Subject string `json:"subject,omitempty"`
	// RequestID is the quarantined request's id; NewRequestID the replay's
	// ("<original>-r<count>"), empty when the payload went out verbatim.
	RequestID    string `json:"request_id,omitempty"`
	NewRequestID string `json:"new_request_id,omitempty"`
	ReplayCount  int    `json:"replay_count"`
	// MsgID is the Nats-Msg-Id of the replay: replaying the same record
	// again publishes nothing.
	MsgID string `json:"msg_id,omitempty"`
	// PublishedSeq is the replay's sequence in the target stream.
	PublishedSeq uint64 `json:"published_seq,omitempty"`
	// Duplicate: this replay had been published before; nothing new went out.
	Duplicate bool `json:"duplicate,omitempty"`
	// Verbatim: the payload is not a valid request and went out byte for
	// byte; it will most likely be quarantined again as invalid_message.
	Verbatim bool `json:"verbatim,omitempty"`
	// Removed: the record was deleted from the quarantine.
	Removed bool `json:"removed,omitempty"`
	// Deadline is the step deadline the replay carries (zero: none), and
	// DeadlineNote where it comes from: a fresh step budget, or the
	// original's deadline (ReplayOptions.KeepDeadline).
	Deadline     time.Time `json:"deadline,omitzero"`
	DeadlineNote string    `json:"deadline_note,omitempty"`
	Note         string    `json:"note,omitempty"`
	Err          string    `json:"error,omitempty"`
}

// ReplayReport sums up a Replay.
type ReplayReport struct {
	DryRun     bool         `json:"dry_run"`
	Items      []ReplayItem `json:"items"`
	Replayed   int          `json:"replayed"`
	Duplicates int          `json:"duplicates"`
	Removed    int          `json:"removed"`
	Failed     int          `json:"failed"`
}

// Replay republishes the selected records' original payloads to their
// original subjects, then deletes the records unless opts.Keep.
//
// A replay is a fresh start: a persona (or compensation) request gets the
// request id "<original>-r<N>", N counting replays of that original, so the
// attempt ledger (keyed by request id) counts from one again; every other
// byte of the payload is kept. Headers Personaq-Replay-Of (the record id),
// Personaq-Replay-Count and Personaq-Original-Request-Id carry the lineage
// (a record of a replayed request shows it). The replay's Nats-Msg-Id is
// "replay.<record id>.<N>" and is also remembered in the index, so
// replaying the same record twice publishes once. A payload that is not a
// valid request is republished byte for byte, with a note: it will fail
// again as invalid_message. The records themselves are never changed.
//
// Errors with single records are reported in their items and counted in
// Failed; the returned error is for the selection itself.
func (i *Inspector) Replay(ctx context.Context, sel Selection, opts ReplayOptions) (*ReplayReport, error) {
	entries, err := i.Select(ctx, sel)
	if err != nil {
		return nil, err
	}
	rep := &ReplayReport{DryRun: opts.DryRun, Items: make([]ReplayItem, 0, len(entries))}
	var lim *rate.Limiter
	if opts.Rate > 0 && !opts.DryRun {
		lim = rate.NewLimiter(rate.Limit(opts.Rate), 1)
	}
	for n, e := range entries {
		if lim != nil {
			if err := lim.Wait(ctx); err != nil {
				return rep, err
			}
		}
		it := i.replayOne(ctx, e, opts)
		switch {
		case it.Err != "":
			rep.Failed++
		case it.Duplicate:
			rep.Duplicates++
		case !opts.DryRun:
			rep.Replayed++
		}
		if it.Removed {
			rep.Removed++
		}
		rep.Items = append(rep.Items, it)
		if opts.Progress != nil {
			opts.Progress(n+1, len(entries))
		}
		if ctx.Err() != nil {
			return rep, ctx.Err()
		}
	}
	return rep, nil
}

func (i *Inspector) replayOne(ctx context.Context, e Entry, opts ReplayOptions) ReplayItem {
	it := ReplayItem{Seq: e.Seq}
	if e.Record == nil {
		it.Err = "stored record does not decode: " + e.Err
		return it
	}
	rec := e.Record
	it.RecordID, it.Reason, it.Subject, it.RequestID = rec.ID, rec.Reason, rec.OriginalSubject, rec.RequestID
	orig, err := i.Message(ctx, rec)
	if err != nil {
		it.Err = err.Error()
		return it
	}
	msg, err := replayMsg(rec, orig, &it)
	if err != nil {
		it.Err = err.Error()
		return it
	}
	replayDeadline(msg, msg.Data, opts.KeepDeadline, i.cfg.Now(), &it)
	if opts.DryRun {
		if i.idx != nil {
			if e, err := i.idx.get(ctx, it.MsgID); err == nil && e != nil && e.Seq > 0 {
				it.PublishedSeq, it.Duplicate = e.Seq, true
			}
		}
		return it
	}
	if err := i.publishReplay(ctx, msg, &it); err != nil {
		it.Err = err.Error()
		return it
	}
	if !opts.Keep {
		s, err := i.stream(ctx)
		if err == nil {
			err = i.remove(ctx, s, e)
		}
		if err != nil {
			it.Err = fmt.Sprintf("replayed as %s seq %d, but the record was not removed: %v", it.Subject, it.PublishedSeq, err)
			return it
		}
		it.Removed = true
	}
	return it
}

// publishReplay publishes msg unless the index says this replay went out
// already; the index is then told.
func (i *Inspector) publishReplay(ctx context.Context, msg *nats.Msg, it *ReplayItem) error {
	if i.idx != nil {
		if e, err := i.idx.get(ctx, it.MsgID); err == nil && e != nil && e.Seq > 0 {
			it.PublishedSeq, it.Duplicate = e.Seq, true
			return nil
		}
	}
	ctx, span := i.replaySpan(ctx, msg, it)
	defer span.End()
	ack, err := i.js.PublishMsg(ctx, msg)
	if err != nil {
		span.SetStatus(codes.Error, err.Error())
		if errors.Is(err, nats.ErrNoResponders) || errors.Is(err, jetstream.ErrNoStreamResponse) {
			return fmt.Errorf("no stream stores %s: %w", msg.Subject, err)
		}
		return fmt.Errorf("republish to %s: %w", msg.Subject, err)
	}
	it.PublishedSeq, it.Duplicate = ack.Sequence, ack.Duplicate
	if i.idx != nil {
		_ = i.idx.put(ctx, it.MsgID, indexEntry{Seq: ack.Sequence, FP: fingerprint(msg.Subject, msg.Data), At: i.cfg.Now().UTC()})
	}
	return nil
}

// replayMsg builds the replay of rec, whose message is orig, and fills
// the item's plan.
func replayMsg(rec *schemas.QuarantineRecord, orig *nats.Msg, it *ReplayItem) (*nats.Msg, error) {
	if rec.OriginalSubject == "" {
		return nil, errors.New("record has no original subject to replay to")
	}
	h := orig.Header
	n := 0
	if rec.Lineage != nil {
		n = rec.Lineage.ReplayCount
	}
	if c, err := strconv.Atoi(h.Get(schemas.HeaderReplayCount)); err == nil && c > n {
		n = c
	}
	n++
	first := firstNonEmpty(h.Get(schemas.HeaderOriginalRequestID), lineageOrig(rec), rec.RequestID)
	it.ReplayCount, it.MsgID = n, fmt.Sprintf("replay.%s.%d", rec.ID, n)

	data := orig.Data
	if id, ok := requestIDOf(orig.Data); ok {
		if first == "" {
			first = id
		}
		it.NewRequestID = fmt.Sprintf("%s-r%d", first, n)
		rewritten, err := withRequestID(orig.Data, it.NewRequestID)
		if err != nil {
			return nil, err
		}
		data = rewritten
	} else {
		it.Verbatim = true
		it.Note = "payload is not a valid request: republished byte for byte; it will most likely be quarantined again as invalid_message"
	}
	msg := &nats.Msg{Subject: rec.OriginalSubject, Data: data, Header: nats.Header{}}
	for k, v := range h {
		if strings.HasPrefix(k, "Nats-") || strings.HasPrefix(k, "Personaq-Replay") || k == schemas.HeaderOriginalRequestID {
			continue
		}
		msg.Header[k] = append([]string(nil), v...)
	}
	msg.Header.Set(jetstream.MsgIDHeader, it.MsgID)
	if rec.CorrelationID != "" && msg.Header.Get(schemas.HeaderCorrelationID) == "" {
		// Keep the correlation across replays (the runtime falls back to
		// the request id, which a replay changes).
		msg.Header.Set(schemas.HeaderCorrelationID, rec.CorrelationID)
	}
	msg.Header.Set(schemas.HeaderReplayOf, rec.ID)
	msg.Header.Set(schemas.HeaderReplayCount, strconv.Itoa(n))
	if first != "" {
		msg.Header.Set(schemas.HeaderOriginalRequestID, first)
	}
	return msg, nil
}

// requestIDOf reports the request id of a payload that is a valid persona
// or compensation request.
func requestIDOf(payload []byte) (string, bool) {
	if req, err := schemas.DecodeRequest(payload); err == nil {
		return req.RequestID, true
	}
	if req, err := schemas.DecodeCompensation(payload); err == nil {
		return req.RequestID, true
	}
	return "", false
}

// withRequestID replaces the value of the top-level "request_id" and keeps
// every other byte of the payload (key order, spacing). A payload where
// that does not give the intended id (a duplicate key) is re-marshalled.
func withRequestID(payload []byte, id string) ([]byte, error) {
	val, _ := json.Marshal(id)
	if out, ok := spliceRequestID(payload, val); ok {
		if id2, ok := requestIDOf(out); ok && id2 == id {
			return out, nil
		}
	}
	var doc map[string]json.RawMessage
	if err := json.Unmarshal(payload, &doc); err != nil {
		return nil, fmt.Errorf("rewrite request id: %w", err)
	}
	doc["request_id"] = val
	return json.Marshal(doc)
}

// spliceRequestID swaps the bytes of the top-level request_id value.
func spliceRequestID(payload, val []byte) ([]byte, bool) {
	dec := json.NewDecoder(bytes.NewReader(payload))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil, false
	}
	for dec.More() {
		key, err := dec.Token()
		if err != nil {
			return nil, false
		}
		start := dec.InputOffset()
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, false
		}
		if key != "request_id" {
			continue
		}
		end := dec.InputOffset()
		i := bytes.IndexByte(payload[start:end], '"')
		if i < 0 {
			return nil, false
		}
		return slices.Concat(payload[:int(start)+i], val, payload[end:]), true
	}
	return nil, false
}

func lineageOrig(rec *schemas.QuarantineRecord) string {
	if rec.Lineage == nil {
		return ""
	}
	return rec.Lineage.OriginalRequestID
}

func firstNonEmpty(v ...string) string {
	for _, s := range v {
		if s != "" {
			return s
		}
	}
	return ""
}

// PurgeOptions tune Purge.
type PurgeOptions struct {
	// DryRun reports what would be deleted and deletes nothing.
	DryRun bool
	// Progress, when set, is called after each record.
	Progress func(done, total int)
}

// PurgeReport sums up a Purge.
type PurgeReport struct {
	DryRun  bool     `json:"dry_run"`
	Entries []Entry  `json:"entries"`
	Purged  int      `json:"purged"`
	Failed  int      `json:"failed"`
	Errors  []string `json:"errors,omitempty"`
}

// Purge deletes the selected records, one by one, so that exactly what was
// selected (and shown in a dry run) goes.
func (i *Inspector) Purge(ctx context.Context, sel Selection, opts PurgeOptions) (*PurgeReport, error) {
	entries, err := i.Select(ctx, sel)
	if err != nil {
		return nil, err
	}
	rep := &PurgeReport{DryRun: opts.DryRun, Entries: entries}
	if opts.DryRun || len(entries) == 0 {
		return rep, nil
	}
	s, err := i.stream(ctx)
	if err != nil {
		return nil, err
	}
	for n, e := range entries {
		if err := i.remove(ctx, s, e); err != nil {
			rep.Failed++
			rep.Errors = append(rep.Errors, fmt.Sprintf("seq %d: %v", e.Seq, err))
		} else {
			rep.Purged++
		}
		if opts.Progress != nil {
			opts.Progress(n+1, len(entries))
		}
		if ctx.Err() != nil {
			return rep, ctx.Err()
		}
	}
	return rep, nil
}
