package schemas

// fastScan's value scanners hold the text to JSON's grammar as strictly as
// encoding/json does (no control characters in strings, only JSON's
// escapes, numbers as JSON spells them), so that the request path, which
// never calls json.Unmarshal, accepts no text the full path would refuse.

// str scans a string and returns its raw contents, and whether they hold
// an escape.
func (s *fastScan) str() (raw []byte, escaped, ok bool) {
	if s.peek() != '"' {
		return nil, false, false
	}
	s.i++
	start := s.i
	for s.i < len(s.data) {
		switch c := s.data[s.i]; {
		case c == '"':
			raw = s.data[start:s.i]
			s.i++
			return raw, escaped, true
		case c == '\\':
			escaped = true
			if !s.escape() {
				return nil, false, false
			}
		case c < 0x20:
			return nil, false, false
		default:
			s.i++
		}
	}
	return nil, false, false
}

// escape scans the escape sequence at the backslash at s.i.
func (s *fastScan) escape() bool {
	if s.i+1 >= len(s.data) {
		return false
	}
	switch s.data[s.i+1] {
	case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
		s.i += 2
		return true
	case 'u':
		if _, ok := hex4(s.data[s.i+2:]); !ok {
			return false
		}
		s.i += 6
		return true
	}
	return false
}

// key scans an object key, whatever it is, and its colon.
func (s *fastScan) key() bool {
	if _, _, ok := s.str(); !ok || s.peek() != ':' {
		return false
	}
	s.i++
	return true
}

// skip scans any value; a null (at any depth) fails unless nullOK. It does
// not recurse, so a deeply nested "input" costs no stack: the containers
// still open are a bit stack (nesting).
func (s *fastScan) skip(nullOK bool) bool {
	var n nesting
	for {
		if c := s.peek(); c == '{' || c == '[' {
			s.i++
			if !n.push(c == '{') {
				return false
			}
			if s.peek() != n.closer() {
				if c == '{' && !s.key() {
					return false
				}
				continue
			}
		} else if !s.scalar(nullOK) {
			return false
		}
		// A value (or an empty container's opening) is behind us: close
		// what ends here, up to the comma that starts the next value.
		for {
			if n.depth == 0 {
				return true
			}
			c := s.peek()
			if c == n.closer() {
				s.i++
				n.depth--
				continue
			}
			if c != ',' {
				return false
			}
			s.i++
			if n.inObject() && !s.key() {
				return false
			}
			break
		}
	}
}

// maxNesting bounds how deep skip follows containers. encoding/json allows
// 10000 levels; deeper than this falls back, which is only slower.
const maxNesting = 256

// nesting is the stack of open containers, one bit each: 1 for an object.
type nesting struct {
	open  [maxNesting / 64]uint64
	depth int
}

func (n *nesting) push(object bool) bool {
	if n.depth == maxNesting {
		return false
	}
	word, bit := n.depth/64, uint(n.depth%64)
	n.open[word] &^= 1 << bit
	if object {
		n.open[word] |= 1 << bit
	}
	n.depth++
	return true
}

func (n *nesting) inObject() bool {
	top := n.depth - 1
	return n.open[top/64]&(1<<uint(top%64)) != 0
}

func (n *nesting) closer() byte {
	if n.inObject() {
		return '}'
	}
	return ']'
}

// scalar scans a string, number, true, false or (if nullOK) null.
func (s *fastScan) scalar(nullOK bool) bool {
	switch s.peek() {
	case '"':
		_, _, ok := s.str()
		return ok
	case 'n':
		return nullOK && s.literal("null")
	case 't':
		return s.literal("true")
	case 'f':
		return s.literal("false")
	}
	_, ok := s.number()
	return ok
}

// number scans -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)? and returns it.
func (s *fastScan) number() ([]byte, bool) {
	s.ws()
	start := s.i
	s.eat('-')
	if !s.eat('0') && !s.digits() {
		return nil, false
	}
	if s.eat('.') && !s.digits() {
		return nil, false
	}
	if s.eat('e') || s.eat('E') {
		_ = s.eat('+') || s.eat('-')
		if !s.digits() {
			return nil, false
		}
	}
	return s.data[start:s.i], true
}

// integer scans a number that json.Unmarshal stores in an integer field
// as it is, and that lies in [lo, hi]. Anything unusual falls back: a
// fraction or exponent (1.0 and 1e2 are integers to the schema, errors to
// json.Unmarshal), or more than 18 digits (which could overflow).
func (s *fastScan) integer(lo, hi int64) (int64, bool) {
	tok, ok := s.number()
	if !ok {
		return 0, false
	}
	digits := tok
	if digits[0] == '-' {
		digits = digits[1:]
	}
	if len(digits) > 18 {
		return 0, false
	}
	var n int64
	for _, c := range digits {
		if !isDigit(c) {
			return 0, false
		}
		n = n*10 + int64(c-'0')
	}
	if tok[0] == '-' {
		n = -n
	}
	return n, lo <= n && n <= hi
}

// eat consumes c if it is next, without skipping whitespace.
func (s *fastScan) eat(c byte) bool {
	if s.i < len(s.data) && s.data[s.i] == c {
		s.i++
		return true
	}
	return false
}

func (s *fastScan) digits() bool {
	start := s.i
	for s.i < len(s.data) && isDigit(s.data[s.i]) {
		s.i++
	}
	return s.i > start
}
