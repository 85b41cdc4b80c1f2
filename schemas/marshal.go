package schemas

import (
	"encoding/json"
	"math"
	"strconv"
	"time"
	"unicode/utf8"
)

// MarshalOutcome returns ev as json.Marshal writes it, byte for byte (a
// test and a fuzz target hold it to that), without reflection: the runtime
// writes one outcome event per request. Like json.Marshal, and unlike
// Encode, it does not validate ev against its schema: it is for events the
// runtime builds itself.
func MarshalOutcome(ev *OutcomeEvent) ([]byte, error) {
	if !strictTime(ev.At) || !strictTime(ev.SubmittedAt) {
		// Outside what time.Time.MarshalJSON accepts: let it say why.
		return json.Marshal(ev)
	}
	b := make([]byte, 0, outcomeSize(ev))
	b = append(b, `{"schema_version":`...)
	b = strconv.AppendInt(b, int64(ev.SchemaVersion), 10)
	b = appendField(b, `,"request_id":`, ev.RequestID)
	b = appendField(b, `,"task_id":`, ev.TaskID)
	b = appendField(b, `,"step":`, ev.Step)
	b = appendField(b, `,"persona":`, ev.Persona)
	b = appendField(b, `,"outcome":`, string(ev.Outcome))
	b = appendOptional(b, `,"reason":`, string(ev.Reason))
	b = append(b, `,"attempts":`...)
	b = strconv.AppendInt(b, int64(ev.Attempts), 10)
	b = appendOptional(b, `,"agent":`, ev.Agent)
	b = appendProgress(b, ev.Progress)
	b = appendOptional(b, `,"last_error":`, ev.LastError)
	b = append(b, `,"duration_ms":`...)
	b = strconv.AppendInt(b, ev.DurationMs, 10)
	b = appendOptional(b, `,"correlation_id":`, ev.CorrelationID)
	if ev.QuarantineSeq != 0 {
		b = append(b, `,"quarantine_seq":`...)
		b = strconv.AppendUint(b, ev.QuarantineSeq, 10)
	}
	b = append(b, `,"at":"`...)
	b = ev.At.AppendFormat(b, time.RFC3339Nano)
	b = append(b, '"')
	b = appendOptional(b, `,"detail":`, ev.Detail)
	if ev.Blocked {
		b = append(b, `,"blocked":true`...)
	}
	if len(ev.Output) > 0 {
		b = append(b, `,"output":`...)
		var err error
		if b, err = appendRaw(b, ev.Output); err != nil {
			return nil, err
		}
	}
	if ev.OutputRef != nil {
		b = append(b, `,"output_ref":{"bucket":`...)
		b = AppendString(b, ev.OutputRef.Bucket)
		b = appendField(b, `,"name":`, ev.OutputRef.Name)
		b = append(b, `,"size":`...)
		b = strconv.AppendInt(b, ev.OutputRef.Size, 10)
		b = appendField(b, `,"digest":`, ev.OutputRef.Digest)
		b = append(b, '}')
	}
	if !ev.SubmittedAt.IsZero() {
		b = append(b, `,"submitted_at":"`...)
		b = ev.SubmittedAt.AppendFormat(b, time.RFC3339Nano)
		b = append(b, '"')
	}
	b = appendOptional(b, `,"cancelled_by":`, ev.CancelledBy)
	b, err := appendUsage(b, ev.Usage)
	if err != nil {
		return nil, err
	}
	b = appendOptional(b, `,"request_digest":`, ev.RequestDigest)
	return append(b, '}'), nil
}

// outcomeSize is what MarshalOutcome writes for ev but for escapes: its
// buffer is allocated once, not grown while written.
func outcomeSize(ev *OutcomeEvent) int {
	// The keys, numbers and time of an event with every field set, and
	// the quotes around its strings.
	n := 400 + len(ev.RequestID) + len(ev.TaskID) + len(ev.Step) + len(ev.Persona) +
		len(ev.Agent) + len(ev.LastError) + len(ev.CorrelationID) + len(ev.Detail) +
		len(ev.Output) + len(ev.CancelledBy) + len(ev.RequestDigest)
	if r := ev.OutputRef; r != nil {
		n += 96 + len(r.Bucket) + len(r.Name) + len(r.Digest)
	}
	if ev.Usage != nil {
		n += 96
	}
	return n
}

// strictTime reports whether time.Time.MarshalJSON writes t as
// AppendFormat(RFC3339Nano) does: a four-digit year and a zone offset
// under a day.
func strictTime(t time.Time) bool {
	if y := t.Year(); y < 0 || y > 9999 {
		return false
	}
	_, off := t.Zone()
	return off > -24*60*60 && off < 24*60*60
}

// appendRaw appends raw JSON as json.Marshal writes a json.RawMessage:
// compacted, with <, >, &, U+2028 and U+2029 escaped. Text already in that
// form (checked, with json.Valid) is copied; anything else is left to
// json.Marshal, which also reports invalid JSON.
func appendRaw(b, raw []byte) ([]byte, error) {
	plain := true
	for _, c := range raw {
		if c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '<' || c == '>' || c == '&' || c == 0xE2 {
			plain = false
			break
		}
	}
	if plain && json.Valid(raw) {
		return append(b, raw...), nil
	}
	out, err := json.Marshal(json.RawMessage(raw))
	if err != nil {
		return nil, err
	}
	return append(b, out...), nil
}

func appendField(b []byte, key, s string) []byte { return AppendString(append(b, key...), s) }

// appendOptional is appendField for an omitempty string.
func appendOptional(b []byte, key, s string) []byte {
	if s == "" {
		return b
	}
	return appendField(b, key, s)
}

// AppendString appends s as a JSON string exactly as json.Marshal writes
// it: <, > and & escaped as \u003c, \u003e and \u0026, invalid UTF-8 as
// \ufffd, U+2028 and U+2029 escaped. For encoders that must match
// json.Marshal byte for byte without its reflection.
func AppendString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		if c := s[i]; c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hex[r&0xf])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

// MarshalAttempt returns ev as json.Marshal writes it, byte for byte,
// without reflection: the runtime publishes attempt events on every
// attempt. Like json.Marshal it does not validate ev.
func MarshalAttempt(ev *AttemptEvent) ([]byte, error) {
	if !strictTime(ev.At) || !strictTime(ev.Deadline) || !strictTime(ev.CreatedAt) {
		return json.Marshal(ev)
	}
	b := make([]byte, 0, 320+len(ev.Error))
	b = append(b, `{"schema_version":`...)
	b = strconv.AppendInt(b, int64(ev.SchemaVersion), 10)
	b = appendField(b, `,"request_id":`, ev.RequestID)
	b = appendField(b, `,"task_id":`, ev.TaskID)
	b = appendField(b, `,"step":`, ev.Step)
	b = appendField(b, `,"persona":`, ev.Persona)
	b = appendField(b, `,"kind":`, string(ev.Kind))
	b = append(b, `,"attempt":`...)
	b = strconv.AppendInt(b, int64(ev.Attempt), 10)
	b = appendInt(b, `,"max_attempts":`, int64(ev.MaxAttempts))
	b = appendOptional(b, `,"agent":`, ev.Agent)
	b = appendOptional(b, `,"class":`, ev.Class)
	b = appendOptional(b, `,"error":`, ev.Error)
	b = appendProgress(b, ev.Progress)
	b = appendInt(b, `,"duration_ms":`, ev.DurationMs)
	b = appendInt(b, `,"next_attempt":`, int64(ev.NextAttempt))
	b = appendOptional(b, `,"next_agent":`, ev.NextAgent)
	b = appendInt(b, `,"next_delay_ms":`, ev.NextDelayMs)
	b = appendOptional(b, `,"correlation_id":`, ev.CorrelationID)
	b = append(b, `,"at":"`...)
	b = ev.At.AppendFormat(b, time.RFC3339Nano)
	b = append(b, '"')
	b = appendOptional(b, `,"waiting_for":`, ev.WaitingFor)
	b, err := appendUsage(b, ev.Usage)
	if err != nil {
		return nil, err
	}
	b = appendTime(b, `,"deadline":"`, ev.Deadline)
	b = appendTime(b, `,"created_at":"`, ev.CreatedAt)
	b = appendOptional(b, `,"request_digest":`, ev.RequestDigest)
	return append(b, '}'), nil
}

// appendTime appends key (with its opening quote) and t, unless t is zero
// (omitzero).
func appendTime(b []byte, key string, t time.Time) []byte {
	if t.IsZero() {
		return b
	}
	b = t.AppendFormat(append(b, key...), time.RFC3339Nano)
	return append(b, '"')
}

// appendProgress appends the progress field, when p is set.
func appendProgress(b []byte, p *Progress) []byte {
	if p == nil {
		return b
	}
	b = append(b, `,"progress":{"completed":`...)
	b = strconv.AppendInt(b, int64(p.Completed), 10)
	b = append(b, `,"total":`...)
	b = strconv.AppendInt(b, int64(p.Total), 10)
	return append(b, '}')
}

// appendUsage appends the usage field, when u is set. A cost that is not
// a finite number is left to json.Marshal, which says why it fails.
func appendUsage(b []byte, u *Usage) ([]byte, error) {
	if u == nil {
		return b, nil
	}
	if math.IsNaN(u.CostUSD) || math.IsInf(u.CostUSD, 0) {
		_, err := json.Marshal(u)
		return nil, err
	}
	b = append(b, `,"usage":{"input_tokens":`...)
	b = strconv.AppendInt(b, u.InputTokens, 10)
	b = append(b, `,"output_tokens":`...)
	b = strconv.AppendInt(b, u.OutputTokens, 10)
	if u.CostUSD != 0 {
		b = appendFloat(append(b, `,"cost_usd":`...), u.CostUSD)
	}
	return append(b, '}'), nil
}

// appendInt appends key and n unless n is zero (omitempty).
func appendInt(b []byte, key string, n int64) []byte {
	if n == 0 {
		return b
	}
	return strconv.AppendInt(append(b, key...), n, 10)
}
