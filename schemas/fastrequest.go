package schemas

import (
	"encoding/json"
	"math"
	"strconv"
	"strings"
)

// fastDecodeRequest returns the request and true if data is certainly valid.
// It decodes without reflection, in one pass that both checks the text and
// fills the struct: json.Unmarshal's recursive, reflective frames grew the
// stack of every goroutine that decoded a request. Each number is checked
// against its schema bounds where it is read; the plain strings are built
// at the end from one allocation, then checked.
func fastDecodeRequest(data []byte) (*PersonaRequest, bool) { return fastDecodeRequestIn(data, false) }

// fastDecodeRequestIn is fastDecodeRequest; with inPlace the input is
// data's own bytes, not a copy.
func fastDecodeRequestIn(data []byte, inPlace bool) (*PersonaRequest, bool) {
	if len(data) > MaxPayloadBytes || !isText(data) {
		return nil, false
	}
	s := requestScan{fastScan: fastScan{data: data}, v: new(PersonaRequest), inPlace: inPlace}
	top, ok := s.object(requestKeys[:], s.field)
	if !ok || !s.end() || top&requestRequired != requestRequired || !s.fillText() {
		return nil, false
	}
	// The time is parsed exactly as json.Unmarshal parses it, by
	// time.Time's UnmarshalJSON on the quoted text; here, not where the
	// scan found it, since its frames are the deepest of all.
	v := s.v
	if v.CreatedAt.UnmarshalJSON(data[s.createdAt.from:s.createdAt.to]) != nil ||
		!textValid(v, top&(1<<reqAgents) != 0) {
		return nil, false
	}
	return v, true
}

// textValid checks the plain strings against their schema, once fillText
// has built them.
func textValid(v *PersonaRequest, agents bool) bool {
	if agents && (!runesIn(v.Agents.Primary, 1, 256) || !runesIn(v.Agents.Fallback, 0, 256)) {
		return false
	}
	return runesIn(v.RequestID, 1, 256) &&
		safeToken(v.TaskID) && safeToken(v.Step) && safeToken(v.Persona) &&
		runesIn(v.Policy, 0, 64) &&
		runesIn(v.CorrelationID, 0, 256)
}

// requestScan fills v as fastScan walks a request.
type requestScan struct {
	fastScan
	v         *PersonaRequest
	inPlace   bool                // Input is data's bytes (DecodeRequestInPlace)
	text      [numTextFields]span // where each plain string's raw contents are
	createdAt span                // created_at's text, quotes included
}

// span is a range of the message, data[from:to].
type span struct{ from, to int32 }

// The plain string fields, in the order agentsKeys gives the last two.
const (
	textRequestID = iota
	textTaskID
	textStep
	textPersona
	textPolicy
	textCorrelationID
	textPrimary
	textFallback
	numTextFields
)

func (s *requestScan) field(k int) bool {
	switch k {
	case reqSchemaVersion:
		n, ok := s.integer(Version, Version)
		s.v.SchemaVersion = int(n)
		return ok
	case reqRequestID:
		return s.textAt(textRequestID)
	case reqTaskID:
		return s.textAt(textTaskID)
	case reqStep:
		return s.textAt(textStep)
	case reqPersona:
		return s.textAt(textPersona)
	case reqAgents:
		_, ok := s.object(agentsKeys[:], func(k int) bool { return s.textAt(textPrimary + k) })
		return ok
	case reqInput:
		return s.input()
	case reqPolicy:
		return s.textAt(textPolicy)
	case reqPolicyOverrides:
		s.v.PolicyOverrides = new(PolicyOverrides)
		_, ok := s.object(overridesKeys[:], s.override)
		return ok
	case reqProgressTotal:
		n, ok := s.integer(0, math.MaxInt32)
		s.v.ProgressTotal = int(n)
		return ok
	case reqCorrelationID:
		return s.textAt(textCorrelationID)
	case reqCreatedAt:
		raw, escaped, ok := s.str()
		s.createdAt = span{int32(s.i - 2 - len(raw)), int32(s.i)}
		return ok && !escaped && rfc3339Shape(raw)
	case reqBudget:
		s.v.Budget = new(Budget)
		_, ok := s.object(budgetKeys[:], s.budget)
		return ok
	}
	return false
}

// textAt scans a string whose value fillText builds later.
func (s *requestScan) textAt(k int) bool {
	raw, _, ok := s.str()
	s.text[k] = span{int32(s.i - 1 - len(raw)), int32(s.i - 1)}
	return ok
}

// fillText unescapes every plain string into one allocation.
func (s *requestScan) fillText() bool {
	size := 0
	for _, sp := range s.text {
		size += int(sp.to - sp.from) // unescaping never lengthens
	}
	var b strings.Builder
	b.Grow(size)
	var ends [numTextFields]int
	for k, sp := range s.text {
		if !unquote(&b, s.data[sp.from:sp.to]) {
			return false
		}
		ends[k] = b.Len()
	}
	all, v := b.String(), s.v
	dst := [numTextFields]*string{
		&v.RequestID, &v.TaskID, &v.Step, &v.Persona, &v.Policy, &v.CorrelationID,
		&v.Agents.Primary, &v.Agents.Fallback,
	}
	from := 0
	for k, p := range dst {
		*p = all[from:ends[k]]
		from = ends[k]
	}
	return true
}

// input keeps the value's text as json.RawMessage does: a copy, since the
// caller may reuse data; in place, data's own bytes (capped, so an append
// to Input cannot write into the rest of data).
func (s *requestScan) input() bool {
	s.ws()
	start := s.i
	if !s.skip(true) {
		return false
	}
	if s.inPlace {
		s.v.Input = json.RawMessage(s.data[start:s.i:s.i])
	} else {
		s.v.Input = append(json.RawMessage(nil), s.data[start:s.i]...)
	}
	return true
}

func (s *requestScan) override(k int) bool {
	o := s.v.PolicyOverrides
	switch k {
	case ovMaxAttempts:
		n, ok := s.integer(1, 100)
		o.MaxAttempts = int(n)
		return ok
	case ovAttemptTimeout:
		n, ok := s.integer(1, 86_400_000)
		o.AttemptTimeoutMs = n
		return ok
	case ovBackoff:
		o.BackoffMs = make([]int64, 0, 4) // json makes [] empty, not nil; 4 fits most schedules
		return s.array(func() bool {
			n, ok := s.integer(0, 86_400_000)
			o.BackoffMs = append(o.BackoffMs, n)
			return ok
		})
	case ovQueueWait:
		n, ok := s.integer(1, 86_400_000)
		o.QueueWaitMs = n
		return ok
	case ovNonRetryable:
		o.NonRetryable = []string{}
		return s.array(func() bool {
			t, ok := s.string()
			o.NonRetryable = append(o.NonRetryable, t)
			return ok && runesIn(t, 1, 256)
		})
	}
	return false
}

func (s *requestScan) budget(k int) bool {
	b := s.v.Budget
	if k == 0 { // max_tokens
		n, ok := s.integer(0, math.MaxInt64)
		b.MaxTokens = n
		return ok
	}
	// max_cost_usd, minimum 0. A negative number that rounds to -0
	// (-1e-400) is below the minimum to the schema, not to a float64:
	// every "-" falls back.
	tok, ok := s.number()
	if !ok || tok[0] == '-' {
		return false
	}
	f, ok := exactFloat(tok)
	if !ok {
		var err error
		f, err = strconv.ParseFloat(string(tok), 64)
		ok = err == nil
	}
	b.MaxCostUSD = f
	return ok
}

// array scans an array of at most 100 items (the schema's maxItems for
// every array in a request), calling item to scan each.
func (s *requestScan) array(item func() bool) bool {
	if s.peek() != '[' {
		return false
	}
	s.i++
	if s.peek() == ']' {
		s.i++
		return true
	}
	for n := 1; n <= 100; n++ {
		if !item() {
			return false
		}
		switch s.peek() {
		case ',':
			s.i++
		case ']':
			s.i++
			return true
		default:
			return false
		}
	}
	return false
}

// string scans a string and returns it unescaped, in its own allocation.
func (s *requestScan) string() (string, bool) {
	raw, escaped, ok := s.str()
	if !ok {
		return "", false
	}
	if !escaped {
		return string(raw), true
	}
	var b strings.Builder
	b.Grow(len(raw))
	ok = unquote(&b, raw)
	return b.String(), ok
}
