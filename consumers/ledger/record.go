package ledger

import (
	"encoding/json"
	"fmt"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/personaq/personaq/retry"
	"github.com/personaq/personaq/schemas"
)

// LostAttemptError is the error text of an attempt the ledger recorded on its
// own because it was begun and never finished (its worker died). Such an
// attempt has class retryable, no progress, Duration from its start until the
// loss was noticed, and At its start.
const LostAttemptError = "attempt did not finish (worker lost)"

// record is the stored form of one attempt. The field order matters: the
// scripts find an attempt's record by the prefix {"attempt":<n>, and a lost
// record by {"attempt":<n>,"lost":true, (see scripts.go).
type record struct {
	Attempt      int      `json:"attempt"`
	Lost         bool     `json:"lost,omitempty"`
	Role         string   `json:"role,omitempty"`
	Agent        string   `json:"agent,omitempty"`
	Class        string   `json:"class"`
	ErrorTypes   []string `json:"error_types,omitempty"`
	Error        string   `json:"error,omitempty"`
	Feedback     string   `json:"feedback,omitempty"`
	Output       string   `json:"output,omitempty"`
	RetryAfterMS int64    `json:"retry_after_ms,omitempty"`
	Progress     progress `json:"progress"`
	DurationMS   int64    `json:"duration_ms"`
	AtMS         int64    `json:"at_ms"`
	RequestID    string   `json:"request_id,omitempty"`
	Usage        *usage   `json:"usage,omitempty"`
	Trace        string   `json:"trace,omitempty"`
}

// usage is an attempt's retry.Usage; absent when it reported none.
type usage struct {
	InputTokens  int64   `json:"input_tokens,omitempty"`
	OutputTokens int64   `json:"output_tokens,omitempty"`
	CostUSD      float64 `json:"cost_usd,omitempty"`
}

type progress struct {
	Completed int `json:"completed"`
	Total     int `json:"total"`
}

func encodeRecord(a retry.Attempt, requestID string, maxText int) (string, error) {
	r := record{
		Attempt:      a.Number,
		Role:         string(a.Role),
		Agent:        a.Agent,
		Class:        a.Class.String(),
		ErrorTypes:   a.ErrorTypes,
		Error:        truncate(a.Error, maxText),
		Feedback:     truncate(a.Feedback, maxText),
		Output:       truncate(a.Output, maxText),
		RetryAfterMS: a.RetryAfter.Milliseconds(),
		Progress:     progress{Completed: a.Progress.Completed, Total: a.Progress.Total},
		DurationMS:   a.Duration.Milliseconds(),
		AtMS:         a.At.UnixMilli(),
		RequestID:    requestID,
		Trace:        a.Trace,
	}
	if u := a.Usage; !u.IsZero() {
		r.Usage = &usage{InputTokens: u.InputTokens, OutputTokens: u.OutputTokens, CostUSD: u.CostUSD}
	}
	b, err := r.appendJSON(make([]byte, 0, 512))
	if err != nil {
		return "", fmt.Errorf("ledger: encode attempt %d: %w", a.Number, err)
	}
	return string(b), nil
}

func decodeRecord(s string) (retry.Attempt, error) {
	var r record
	if err := json.Unmarshal([]byte(s), &r); err != nil {
		return retry.Attempt{}, fmt.Errorf("%w: attempt record: %w", ErrCorrupt, err)
	}
	class, err := retry.ParseClass(r.Class)
	if err != nil {
		return retry.Attempt{}, fmt.Errorf("%w: attempt %d: class %q", ErrCorrupt, r.Attempt, r.Class)
	}
	if r.Attempt < 1 {
		return retry.Attempt{}, fmt.Errorf("%w: attempt record without a number: %.80s", ErrCorrupt, s)
	}
	var u retry.Usage
	if r.Usage != nil {
		u = retry.Usage{InputTokens: r.Usage.InputTokens, OutputTokens: r.Usage.OutputTokens, CostUSD: r.Usage.CostUSD}
	}
	return retry.Attempt{
		Usage:      u,
		Number:     r.Attempt,
		Role:       retry.Role(r.Role),
		Agent:      r.Agent,
		Class:      class,
		ErrorTypes: r.ErrorTypes,
		Error:      r.Error,
		Feedback:   r.Feedback,
		Output:     r.Output,
		RetryAfter: time.Duration(r.RetryAfterMS) * time.Millisecond,
		Progress:   retry.Progress{Completed: r.Progress.Completed, Total: r.Progress.Total},
		Duration:   time.Duration(r.DurationMS) * time.Millisecond,
		At:         time.UnixMilli(r.AtMS).UTC(),
		Trace:      r.Trace,
	}, nil
}

func decodeRecords(raw []any) ([]retry.Attempt, error) {
	out := make([]retry.Attempt, 0, len(raw))
	for _, v := range raw {
		s, ok := v.(string)
		if !ok {
			return nil, fmt.Errorf("%w: attempt record of type %T", ErrCorrupt, v)
		}
		a, err := decodeRecord(s)
		if err != nil {
			return nil, err
		}
		out = append(out, a)
	}
	return out, nil
}

// truncate cuts s to at most limit bytes on a rune boundary and appends a
// marker saying how much was cut, so a reader knows the text is partial.
func truncate(s string, limit int) string {
	if len(s) <= limit {
		return s
	}
	cut := limit
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + fmt.Sprintf("…[truncated %d of %d bytes]", len(s)-cut, len(s))
}

// appendJSON appends r as json.Marshal writes it, byte for byte (a test
// holds it to that), without reflection: Finish encodes a record per
// attempt. Usage, rarely set and holding a float, goes through
// json.Marshal.
func (r *record) appendJSON(b []byte) ([]byte, error) {
	b = append(b, `{"attempt":`...)
	b = strconv.AppendInt(b, int64(r.Attempt), 10)
	if r.Lost {
		b = append(b, `,"lost":true`...)
	}
	b = appendStringField(b, `,"role":`, r.Role)
	b = appendStringField(b, `,"agent":`, r.Agent)
	b = append(b, `,"class":`...)
	b = schemas.AppendString(b, r.Class)
	if len(r.ErrorTypes) > 0 {
		b = append(b, `,"error_types":[`...)
		for i, t := range r.ErrorTypes {
			if i > 0 {
				b = append(b, ',')
			}
			b = schemas.AppendString(b, t)
		}
		b = append(b, ']')
	}
	b = appendStringField(b, `,"error":`, r.Error)
	b = appendStringField(b, `,"feedback":`, r.Feedback)
	b = appendStringField(b, `,"output":`, r.Output)
	if r.RetryAfterMS != 0 {
		b = append(b, `,"retry_after_ms":`...)
		b = strconv.AppendInt(b, r.RetryAfterMS, 10)
	}
	b = append(b, `,"progress":{"completed":`...)
	b = strconv.AppendInt(b, int64(r.Progress.Completed), 10)
	b = append(b, `,"total":`...)
	b = strconv.AppendInt(b, int64(r.Progress.Total), 10)
	b = append(b, `},"duration_ms":`...)
	b = strconv.AppendInt(b, r.DurationMS, 10)
	b = append(b, `,"at_ms":`...)
	b = strconv.AppendInt(b, r.AtMS, 10)
	b = appendStringField(b, `,"request_id":`, r.RequestID)
	if r.Usage != nil {
		u, err := json.Marshal(r.Usage)
		if err != nil {
			return nil, err
		}
		b = append(b, `,"usage":`...)
		b = append(b, u...)
	}
	b = appendStringField(b, `,"trace":`, r.Trace)
	return append(b, '}'), nil
}

// appendStringField appends key and s unless s is empty (omitempty).
func appendStringField(b []byte, key, s string) []byte {
	if s == "" {
		return b
	}
	return schemas.AppendString(append(b, key...), s)
}
