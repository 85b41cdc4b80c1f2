package schemas

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"math"
	"strconv"
	"sync"
	"unicode/utf8"
)

// RequestDigest is the digest of req's content, "sha256:" and 64 hex
// digits: the SHA-256 of the request's JSON object without created_at and
// schema_version (the step deadline travels in a header and is not part of
// it either), with object keys sorted at every level, no insignificant
// whitespace and numbers as written (what encoding/json writes for a
// map). Two submits of one request id are the same request exactly when
// their digests are equal; submit paths refuse the second otherwise (a
// conflict).
//
// The canonical form is written straight from the request's fields
// (canonicalRequest), into a pooled buffer: the runtime digests every
// request it ends. Only content that form does not cover (text that is not
// valid UTF-8, a string in the input whose escapes encoding/json would
// write differently, a key with an escape) takes the slower re-encoding
// through a map, which defines the form.
func RequestDigest(req *PersonaRequest) string {
	d := digestPool.Get().(*digester)
	data, ok := d.canonicalRequest(req)
	if !ok {
		data = canonicalOrRaw(req)
	}
	sum := sha256.Sum256(data)
	if cap(d.buf) <= maxPooledDigest {
		digestPool.Put(d)
	}
	var out [len(digestPrefix) + 2*sha256.Size]byte
	copy(out[:], digestPrefix)
	hex.Encode(out[len(digestPrefix):], sum[:])
	return string(out[:])
}

const digestPrefix = "sha256:"

// maxPooledDigest bounds the buffer a pooled digester keeps: a request
// with a large input should not pin its size in memory.
const maxPooledDigest = 64 << 10

var digestPool = sync.Pool{New: func() any { return new(digester) }}

// digester is RequestDigest's scratch: the canonical form and the parser
// that puts the input in it, both reused.
type digester struct {
	buf    []byte
	parser canonParser
}

// canonicalOrRaw is the canonical form as it is defined: json.Marshal,
// then a re-encoding (canonicalJSON where it covers the text, a map
// where it does not). A request json.Marshal refuses (its input is not
// JSON, its budget not a finite number) is digested as its id and input.
func canonicalOrRaw(req *PersonaRequest) []byte {
	data, err := json.Marshal(req)
	if err == nil {
		if canon, ok := canonicalJSON(make([]byte, 0, len(data)), data); ok {
			return canon
		}
		data, err = canonicalContent(data)
	}
	if err != nil {
		data = append([]byte(req.RequestID+"\x00"), req.Input...)
	}
	return data
}

// canonicalContent re-encodes a request's JSON without its created_at and
// schema_version, keys sorted, numbers kept as written. It defines the
// digest's canonical form; canonicalJSON writes the same bytes faster.
func canonicalContent(data []byte) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil {
		return nil, err
	}
	delete(m, "created_at")
	delete(m, "schema_version")
	return json.Marshal(m)
}

// canonicalRequest writes what canonicalContent makes of json.Marshal(req)
// without either: the fields json.Marshal writes (omitempty and omitzero
// as it applies them), in key order, each value as a map re-encoding
// writes it back: a string as json.Marshal writes it (valid UTF-8 only: a
// decode would replace invalid bytes), a number as json.Marshal wrote it,
// the input through canonParser. It reports false, and RequestDigest
// takes canonicalOrRaw, for anything else.
func (d *digester) canonicalRequest(req *PersonaRequest) ([]byte, bool) {
	b := append(d.buf[:0], '{')
	defer func() { d.buf = b[:0] }()
	ok := true
	// str appends a string field's key and value, and notes text a
	// re-encoding would not keep.
	str := func(key, s string) {
		ok = ok && utf8.ValidString(s)
		b = AppendString(append(b, key...), s)
	}
	if a := req.Agents; a != (Agents{}) {
		b = append(b, `"agents":{`...)
		if a.Fallback != "" {
			str(`"fallback":`, a.Fallback)
			b = append(b, ',')
		}
		str(`"primary":`, a.Primary)
		b = append(b, "},"...)
	}
	if bg := req.Budget; bg != nil {
		b = append(b, `"budget":{`...)
		if bg.MaxCostUSD != 0 {
			if math.IsNaN(bg.MaxCostUSD) || math.IsInf(bg.MaxCostUSD, 0) {
				return nil, false // json.Marshal fails
			}
			b = appendFloat(append(b, `"max_cost_usd":`...), bg.MaxCostUSD)
			b = append(b, ',')
		}
		if bg.MaxTokens != 0 {
			b = strconv.AppendInt(append(b, `"max_tokens":`...), bg.MaxTokens, 10)
			b = append(b, ',')
		}
		b = closeObject(b)
		b = append(b, ',')
	}
	if req.CorrelationID != "" {
		str(`"correlation_id":`, req.CorrelationID)
		b = append(b, ',')
	}
	if len(req.Input) > 0 {
		var inputOK bool
		b, inputOK = d.parser.input(append(b, `"input":`...), req.Input)
		ok = ok && inputOK
		b = append(b, ',')
	}
	str(`"persona":`, req.Persona)
	b = append(b, ',')
	if req.Policy != "" {
		str(`"policy":`, req.Policy)
		b = append(b, ',')
	}
	if o := req.PolicyOverrides; o != nil {
		b = append(b, `"policy_overrides":{`...)
		b = appendIntMember(b, `"attempt_timeout_ms":`, o.AttemptTimeoutMs)
		if len(o.BackoffMs) > 0 {
			b = append(b, `"backoff_ms":[`...)
			for i, n := range o.BackoffMs {
				if i > 0 {
					b = append(b, ',')
				}
				b = strconv.AppendInt(b, n, 10)
			}
			b = append(b, "],"...)
		}
		b = appendIntMember(b, `"max_attempts":`, int64(o.MaxAttempts))
		if len(o.NonRetryable) > 0 {
			b = append(b, `"non_retryable":[`...)
			for i, s := range o.NonRetryable {
				if i > 0 {
					b = append(b, ',')
				}
				str("", s)
			}
			b = append(b, "],"...)
		}
		b = appendIntMember(b, `"queue_wait_ms":`, o.QueueWaitMs)
		b = closeObject(b)
		b = append(b, ',')
	}
	if req.ProgressTotal != 0 {
		b = appendIntMember(b, `"progress_total":`, int64(req.ProgressTotal))
	}
	str(`"request_id":`, req.RequestID)
	str(`,"step":`, req.Step)
	str(`,"task_id":`, req.TaskID)
	b = append(b, '}')
	return b, ok
}

// appendIntMember appends key, n and a comma unless n is zero (omitempty).
func appendIntMember(b []byte, key string, n int64) []byte {
	if n == 0 {
		return b
	}
	b = strconv.AppendInt(append(b, key...), n, 10)
	return append(b, ',')
}

// closeObject ends an object whose members each end with a comma: the
// last comma becomes the closing brace, or, with no member, the brace
// follows the opening one.
func closeObject(b []byte) []byte {
	if b[len(b)-1] == ',' {
		b[len(b)-1] = '}'
		return b
	}
	return append(b, '}')
}

// appendFloat appends f as json.Marshal writes a float64 (f finite): the
// shortest representation, in exponent form below 1e-6 and from 1e21,
// with a one-digit negative exponent unpadded.
func appendFloat(b []byte, f float64) []byte {
	format := byte('f')
	if abs := math.Abs(f); abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	b = strconv.AppendFloat(b, f, format, -1, 64)
	if format == 'e' {
		// 1e-07 becomes 1e-7.
		if n := len(b); n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
			b[n-2] = b[n-1]
			b = b[:n-1]
		}
	}
	return b
}
