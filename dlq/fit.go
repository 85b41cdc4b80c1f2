package dlq

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/personaq/personaq/schemas"
)

// Limits a record is fitted to before it is published.
const (
	// headerAllowance is kept free of the server's max_payload for the
	// record message's own headers (Nats-Msg-Id, reason, persona, task,
	// saga: a few hundred bytes each at most).
	headerAllowance = 8 << 10
	// defaultMaxPayload is the server's default max_payload, assumed when
	// the connection does not say.
	defaultMaxPayload = 1 << 20
	// maxDetail and maxErrorText bound free text written by personaq or a
	// handler; longer text is cut with a marker saying how much.
	maxDetail    = 16 << 10
	maxErrorText = 8 << 10
	// maxField is the schema's bound on provenance fields, in runes.
	maxField = 256
	// minOutOfLine: a payload or header set smaller than this stays inline
	// (moving it would save next to nothing); the history is trimmed instead.
	minOutOfLine = 4 << 10
)

// budget is the largest record published inline: the schema's bound, or
// less on a server whose max_payload is smaller.
func (w *Writer) budget() int {
	if w.maxRecord > 0 {
		return w.maxRecord
	}
	limit := int64(defaultMaxPayload)
	if nc := w.js.Conn(); nc != nil && nc.MaxPayload() > 0 {
		limit = nc.MaxPayload()
	}
	return int(min(int64(schemas.MaxPayloadBytes), limit-headerAllowance))
}

// prepare returns the record as it is published and its encoding, fitted
// into one message: provenance clipped to the schema's bounds, headers
// encoded (HeaderBase64Prefix), then — only when still too large — the
// payload moved to the object store, then the headers, then the error
// history trimmed with a marker. rec itself is not changed. fp names the
// objects, so a record id reused for another message gets its own.
func (w *Writer) prepare(ctx context.Context, rec *schemas.QuarantineRecord, fp string) (*schemas.QuarantineRecord, []byte, error) {
	r := *rec
	sanitize(&r)
	r.Headers = encodeHeaders(rec.Headers)
	budget := w.budget()
	data, err := json.Marshal(&r)
	if err != nil {
		return nil, nil, err
	}
	if len(data) > budget && len(r.Payload) >= minOutOfLine && r.PayloadRef == nil {
		if r.PayloadRef, err = w.objects.put(ctx, objectName(r.ID, fp, "payload"), r.Payload); err != nil {
			return nil, nil, err
		}
		r.Payload = []byte{}
		w.log.Info().Str("record_id", r.ID).Int64("payload_bytes", r.PayloadRef.Size).Str("bucket", r.PayloadRef.Bucket).
			Msg("quarantine record too large for one message; payload stored out of line")
		if data, err = json.Marshal(&r); err != nil {
			return nil, nil, err
		}
	}
	if hdr, _ := json.Marshal(r.Headers); len(data) > budget && len(hdr) >= minOutOfLine && r.HeadersRef == nil {
		if r.HeadersRef, err = w.objects.put(ctx, objectName(r.ID, fp, "headers"), hdr); err != nil {
			return nil, nil, err
		}
		r.Headers = nil
		if data, err = json.Marshal(&r); err != nil {
			return nil, nil, err
		}
	}
	if len(data) > budget {
		if data, err = trimHistory(&r, budget); err != nil {
			return nil, nil, err
		}
		w.log.Warn().Str("record_id", r.ID).Int("errors_omitted", r.ErrorsOmitted).
			Msg("quarantine record error history trimmed to fit one message")
	}
	if len(data) > budget {
		return nil, nil, fmt.Errorf("record is %d bytes with its payload and headers out of line and its history trimmed (limit %d)", len(data), budget)
	}
	data, err = schemas.Encode(&r)
	return &r, data, err
}

// objectName is the object of one part of a record.
func objectName(id, fp, part string) string { return id + "." + fp + "." + part }

// sanitize brings the fields personaq copies from the message (which may
// be anything) within the schema's bounds: valid UTF-8, at most maxField
// runes; free text at most maxDetail or maxErrorText bytes. A record must
// never fail to be written because of what it records.
func sanitize(r *schemas.QuarantineRecord) {
	for _, f := range []*string{&r.RequestID, &r.TaskID, &r.Step, &r.Persona, &r.SagaID, &r.CorrelationID, &r.Stream} {
		*f = clipRunes(*f, maxField)
	}
	if r.Lineage != nil {
		l := *r.Lineage
		l.ReplayOf, l.OriginalRequestID = clipRunes(l.ReplayOf, maxField), clipRunes(l.OriginalRequestID, maxField)
		r.Lineage = &l
	}
	r.OriginalSubject = clipRunes(r.OriginalSubject, 4096)
	r.Detail = clipText(strings.ToValidUTF8(r.Detail, "\uFFFD"), maxDetail)
	if r.Detail == "" {
		r.Detail = "(no detail given)"
	}
	if r.Payload == nil {
		r.Payload = []byte{}
	}
	r.Errors = slices.Clone(r.Errors)
	for i := range r.Errors {
		a := &r.Errors[i]
		a.Agent, a.ErrorType = clipRunes(a.Agent, maxField), clipRunes(a.ErrorType, maxField)
	}
}

// trimHistory makes the record fit budget: error texts are cut to
// maxErrorText, then attempts are left out of the middle of the history
// (the first and the most recent kept), counted in ErrorsOmitted. It
// returns the new encoding.
func trimHistory(r *schemas.QuarantineRecord, budget int) ([]byte, error) {
	for i := range r.Errors {
		r.Errors[i].Error = clipText(r.Errors[i].Error, maxErrorText)
	}
	data, err := json.Marshal(r)
	if err != nil || len(data) <= budget || len(r.Errors) == 0 {
		return data, err
	}
	sizes := make([]int, len(r.Errors))
	total := 0
	for i, a := range r.Errors {
		b, _ := json.Marshal(a)
		sizes[i] = len(b) + 1
		total += sizes[i]
	}
	room := budget - (len(data) - total) - len(`,"errors_omitted":2147483647`)
	first := 0 // the first attempt is kept when it fits: it shows how it began
	if sizes[0] <= room {
		first, room = 1, room-sizes[0]
	}
	tail := len(r.Errors)
	for tail > first && sizes[tail-1] <= room {
		tail--
		room -= sizes[tail]
	}
	r.ErrorsOmitted += tail - first
	r.Errors = append(slices.Clone(r.Errors[:first]), r.Errors[tail:]...)
	return json.Marshal(r)
}

// clipRunes makes s valid UTF-8 of at most n runes.
func clipRunes(s string, n int) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	if len(s) <= n || utf8.RuneCountInString(s) <= n {
		return s
	}
	return string([]rune(s)[:n-1]) + "…"
}

// clipText cuts s to at most n bytes (on a rune boundary), saying so.
func clipText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	marker := fmt.Sprintf("… [trimmed %d bytes]", len(s)-n)
	cut := n - len(marker)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:max(cut, 0)] + marker
}
