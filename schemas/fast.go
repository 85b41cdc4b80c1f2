package schemas

import (
	"encoding/json"
	"math"
	"unicode/utf8"
)

// The fast paths answer only "valid" (and return exactly the value the full
// path returns) or "not sure": any doubt, including every invalid message,
// sends the input to the full path, which finds and reports the error. So
// the fast path changes speed, never the accepted set or an error.
//
// The outcome path decodes with json.Unmarshal and then checks the decoded
// value by hand. The request path (fastrequest.go) decodes without
// reflection: one pass of fastScan checks the JSON text as strictly as
// encoding/json does and fills the struct as it goes. Either way, these are
// what json.Unmarshal would not tell apart, and what falls back:
//   - key spelling: json.Unmarshal matches keys case-insensitively (and
//     folds "ſ" and "K"), the schema does not. Keys must be exactly a known
//     name, unescaped, or we fall back;
//   - duplicate keys: json.Unmarshal merges duplicate objects, the schema
//     sees the last one. Any duplicate falls back;
//   - null: json.Unmarshal leaves a string, number, time or struct unchanged
//     on null, the schema rejects it. A null anywhere but inside a
//     request's "input" or an outcome's "output" falls back;
//   - presence: a zero value cannot tell an absent optional field from one
//     present with a value the schema rejects (max_attempts: 0);
//   - date-times: the raw text, which must have RFC 3339 shape (rfc3339);
//   - text: json.Unmarshal turns invalid UTF-8 and lone surrogate escapes
//     into U+FFFD, the full path refuses them (checkText). isText checks
//     before anything else.

// fastDecodeOutcome returns the event and true if data is certainly valid.
func fastDecodeOutcome(data []byte) (*OutcomeEvent, bool) {
	if len(data) > MaxPayloadBytes || !isText(data) {
		return nil, false
	}
	v := new(OutcomeEvent)
	if json.Unmarshal(data, v) != nil {
		return nil, false
	}
	sc := fastScan{data: data}
	var progress, ref, usage uint64
	top, ok := sc.object(outcomeKeys[:], func(k int) bool {
		switch k {
		case outProgress:
			var ok bool
			progress, ok = sc.object(progressKeys[:], func(int) bool { return sc.skip(false) })
			return ok
		case outOutputRef:
			var ok bool
			ref, ok = sc.object(objectRefKeys[:], func(int) bool { return sc.skip(false) })
			return ok
		case outUsage:
			var ok bool
			usage, ok = sc.object(usageKeys[:], func(k int) bool {
				if k == usageCost {
					// A negative number that rounds to -0 is below the
					// minimum to the schema, not to a float64: every "-"
					// falls back.
					n, ok := sc.number()
					return ok && n[0] != '-'
				}
				return sc.skip(false)
			})
			return ok
		case outAt, outSubmittedAt:
			return sc.dateTime()
		case outOutput:
			return sc.skip(true) // any JSON value, null too
		}
		return sc.skip(false)
	})
	if !ok || !sc.end() || top&outcomeRequired != outcomeRequired {
		return nil, false
	}
	if v.SchemaVersion != Version ||
		!runesIn(v.RequestID, 1, 256) ||
		!safeToken(v.TaskID) || !safeToken(v.Step) || !safeToken(v.Persona) ||
		!knownOutcome(v.Outcome) ||
		v.Attempts < 0 || v.Attempts > math.MaxInt32 ||
		!runesIn(v.Agent, 0, 256) ||
		v.DurationMs < 0 ||
		!runesIn(v.CorrelationID, 0, 256) ||
		!runesIn(v.CancelledBy, 0, 256) {
		return nil, false
	}
	if top&(1<<outReason) != 0 && !knownReason(v.Reason) {
		return nil, false
	}
	if top&(1<<outProgress) != 0 {
		p := v.Progress
		if p == nil || progress != 1<<progCompleted|1<<progTotal ||
			p.Completed < 0 || p.Completed > math.MaxInt32 || p.Total < 0 || p.Total > math.MaxInt32 {
			return nil, false
		}
	}
	if top&(1<<outOutputRef) != 0 {
		r := v.OutputRef
		if r == nil || ref != 1<<len(objectRefKeys)-1 ||
			r.Bucket == "" || r.Name == "" || r.Digest == "" || r.Size < 0 {
			return nil, false
		}
	}
	if top&(1<<outUsage) != 0 {
		u := v.Usage
		if u == nil || usage&(1<<usageInput|1<<usageOutput) != 1<<usageInput|1<<usageOutput ||
			u.InputTokens < 0 || u.OutputTokens < 0 {
			return nil, false
		}
	}
	if top&(1<<outRequestDigest) != 0 && !digestShape(v.RequestDigest) {
		return nil, false
	}
	return v, true
}

// digestShape is ^sha256:[0-9a-f]{64}$, the schema's pattern for a
// request digest.
func digestShape(s string) bool {
	if len(s) != len(digestPrefix)+64 || s[:len(digestPrefix)] != digestPrefix {
		return false
	}
	for i := len(digestPrefix); i < len(s); i++ {
		if c := s[i]; !isDigit(c) && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

func knownOutcome(o Outcome) bool {
	switch o {
	case OutcomeSucceeded, OutcomeQuarantined, OutcomeDeferred, OutcomeEscalated,
		OutcomeDeadlineExceeded, OutcomeCancelled:
		return true
	}
	return false
}

func knownReason(r Reason) bool {
	switch r {
	case ReasonExhausted, ReasonTerminal, ReasonInvalidMessage, ReasonDeferred,
		ReasonEscalated, ReasonCompensationFailed, ReasonMaxDeliveries,
		ReasonDeadlineExceeded, ReasonUnknownPersona, ReasonBudgetExhausted,
		ReasonCancelled, ReasonQueueWaitExceeded:
		return true
	}
	return false
}

// Key tables, indexed by the bit each key sets in an object's presence mask.
const (
	reqSchemaVersion = iota
	reqRequestID
	reqTaskID
	reqStep
	reqPersona
	reqAgents
	reqInput
	reqPolicy
	reqPolicyOverrides
	reqProgressTotal
	reqCorrelationID
	reqCreatedAt
	reqBudget
	numRequestKeys
)

var requestKeys = [numRequestKeys]string{
	reqSchemaVersion: "schema_version", reqRequestID: "request_id", reqTaskID: "task_id",
	reqStep: "step", reqPersona: "persona", reqAgents: "agents", reqInput: "input",
	reqPolicy: "policy", reqPolicyOverrides: "policy_overrides", reqProgressTotal: "progress_total",
	reqCorrelationID: "correlation_id", reqCreatedAt: "created_at", reqBudget: "budget",
}

var budgetKeys = [...]string{"max_tokens", "max_cost_usd"}

const requestRequired = 1<<reqSchemaVersion | 1<<reqRequestID | 1<<reqTaskID |
	1<<reqStep | 1<<reqPersona | 1<<reqCreatedAt

var agentsKeys = [...]string{"primary", "fallback"}

const (
	ovMaxAttempts = iota
	ovAttemptTimeout
	ovBackoff
	ovNonRetryable
	ovQueueWait
	numOverridesKeys
)

var overridesKeys = [numOverridesKeys]string{
	ovMaxAttempts: "max_attempts", ovAttemptTimeout: "attempt_timeout_ms",
	ovBackoff: "backoff_ms", ovNonRetryable: "non_retryable", ovQueueWait: "queue_wait_ms",
}

const (
	outSchemaVersion = iota
	outRequestID
	outTaskID
	outStep
	outPersona
	outOutcome
	outReason
	outAttempts
	outAgent
	outProgress
	outLastError
	outDurationMs
	outCorrelationID
	outQuarantineSeq
	outAt
	outDetail
	outBlocked
	outOutput
	outOutputRef
	outSubmittedAt
	outCancelledBy
	outUsage
	outRequestDigest
	numOutcomeKeys
)

var outcomeKeys = [numOutcomeKeys]string{
	outSchemaVersion: "schema_version", outRequestID: "request_id", outTaskID: "task_id",
	outStep: "step", outPersona: "persona", outOutcome: "outcome", outReason: "reason",
	outAttempts: "attempts", outAgent: "agent", outProgress: "progress", outLastError: "last_error",
	outDurationMs: "duration_ms", outCorrelationID: "correlation_id",
	outQuarantineSeq: "quarantine_seq", outAt: "at", outDetail: "detail", outBlocked: "blocked",
	outOutput: "output", outOutputRef: "output_ref", outSubmittedAt: "submitted_at",
	outCancelledBy: "cancelled_by", outUsage: "usage", outRequestDigest: "request_digest",
}

// objectRefKeys are an output_ref's keys, all required.
var objectRefKeys = [...]string{"bucket", "name", "size", "digest"}

const (
	usageInput = iota
	usageOutput
	usageCost
)

var usageKeys = [...]string{usageInput: "input_tokens", usageOutput: "output_tokens", usageCost: "cost_usd"}

const outcomeRequired = 1<<outSchemaVersion | 1<<outRequestID | 1<<outTaskID | 1<<outStep |
	1<<outPersona | 1<<outOutcome | 1<<outAttempts | 1<<outDurationMs | 1<<outAt

const (
	progCompleted = iota
	progTotal
)

var progressKeys = [...]string{progCompleted: "completed", progTotal: "total"}

// runesIn reports whether s has between lo and hi runes, counted as the
// schema library counts them (s is valid UTF-8: isText ran first).
func runesIn(s string, lo, hi int) bool {
	if len(s) < lo {
		return false
	}
	if len(s) <= hi && len(s) >= lo && isASCII(s) {
		return true
	}
	n := utf8.RuneCountInString(s)
	return n >= lo && n <= hi
}

// isText reports whether data holds nothing json.Unmarshal would repair.
func isText(data []byte) bool {
	at, _ := badText(data)
	return at < 0
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

// ValidToken reports whether s may be a request's task id, step or
// persona: ^[A-Za-z0-9_-]+$ with 1 to 256 characters, so a subject token
// made of it is one token.
func ValidToken(s string) bool { return safeToken(s) }

// safeToken is ^[A-Za-z0-9_-]+$ with 1 to 256 characters.
func safeToken(s string) bool {
	if len(s) < 1 || len(s) > 256 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// fastScan walks JSON text in one pass, as strictly as encoding/json
// (fastvalue.go): the outcome path's text json.Unmarshal has already
// accepted, the request path's text nothing else checks. It never indexes
// out of range, so that a mistake costs a fall back, not a panic.
type fastScan struct {
	data []byte
	i    int
}

func (s *fastScan) ws() {
	for s.i < len(s.data) {
		switch s.data[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

func (s *fastScan) peek() byte {
	s.ws()
	if s.i < len(s.data) {
		return s.data[s.i]
	}
	return 0
}

// end reports whether only whitespace is left.
func (s *fastScan) end() bool {
	s.ws()
	return s.i == len(s.data)
}

// object scans an object whose every key is, byte for byte, one of names,
// at most once, and calls value with the key's index to scan its value.
// It returns the mask of keys seen.
func (s *fastScan) object(names []string, value func(k int) bool) (uint64, bool) {
	if s.peek() != '{' {
		return 0, false
	}
	s.i++
	var seen uint64
	if s.peek() == '}' {
		s.i++
		return seen, true
	}
	for {
		key, escaped, ok := s.str()
		if !ok || escaped {
			return 0, false
		}
		k := indexOf(names, key)
		if k < 0 || seen&(1<<k) != 0 {
			return 0, false
		}
		seen |= 1 << k
		if s.peek() != ':' {
			return 0, false
		}
		s.i++
		if !value(k) {
			return 0, false
		}
		switch s.peek() {
		case ',':
			s.i++
		case '}':
			s.i++
			return seen, true
		default:
			return 0, false
		}
	}
}

func indexOf(names []string, key []byte) int {
	for i, n := range names {
		if n == string(key) {
			return i
		}
	}
	return -1
}

// dateTime scans a string value that must be an unescaped RFC 3339
// date-time; json.Unmarshal has already parsed it into a time.Time.
func (s *fastScan) dateTime() bool {
	raw, escaped, ok := s.str()
	return ok && !escaped && rfc3339Shape(raw)
}

func (s *fastScan) literal(lit string) bool {
	if len(s.data)-s.i < len(lit) || string(s.data[s.i:s.i+len(lit)]) != lit {
		return false
	}
	s.i += len(lit)
	return true
}

// rfc3339Shape is rfc3339.Match without the regexp:
// ^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]+)?(Z|[+-][0-9]{2}:[0-9]{2})$
func rfc3339Shape(b []byte) bool {
	const head = "dddd-dd-ddTdd:dd:dd"
	if len(b) < len(head)+1 {
		return false
	}
	for i := 0; i < len(head); i++ {
		if !shapeByte(head[i], b[i]) {
			return false
		}
	}
	b = b[len(head):]
	if b[0] == '.' {
		n := 1
		for n < len(b) && isDigit(b[n]) {
			n++
		}
		if n == 1 {
			return false
		}
		b = b[n:]
	}
	if len(b) == 1 {
		return b[0] == 'Z'
	}
	const zone = "+dd:dd"
	if len(b) != len(zone) || b[0] != '+' && b[0] != '-' {
		return false
	}
	for i := 1; i < len(zone); i++ {
		if !shapeByte(zone[i], b[i]) {
			return false
		}
	}
	return true
}

func shapeByte(want, c byte) bool {
	if want == 'd' {
		return isDigit(c)
	}
	return c == want
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }
