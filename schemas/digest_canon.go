package schemas

import (
	"bytes"
	"slices"
	"unicode/utf8"
)

// canonicalJSON appends to dst what canonicalContent makes of the request
// object src (json.Marshal's output: valid, compact JSON): the same object
// without its top-level created_at and schema_version, keys sorted at
// every level (the last of duplicate keys kept, as a map decode does),
// numbers as written. It reports false, and the caller takes
// canonicalContent, for anything it does not reproduce byte for byte: a
// key with an escape (its sort order is that of the decoded key), a string
// escape encoding/json would not write back the same, invalid UTF-8,
// nesting deeper than maxCanonDepth.
func canonicalJSON(dst, src []byte) ([]byte, bool) {
	var stack [32]canonMember
	c := canonParser{fastScan: fastScan{data: src}, members: stack[:0]}
	dst, ok := c.value(dst, 0)
	if !ok {
		return nil, false
	}
	c.ws()
	return dst, c.i == len(src)
}

// input appends the canonical form of a request's input, src, as
// canonicalJSON writes it inside the request: src as the request's
// json.Marshal wrote it (compacted, with <, >, &, U+2028 and U+2029
// escaped) and re-encoded. The parser is as strict as encoding/json on
// what it accepts, so text json.Marshal would refuse is never covered. The
// parser is reused: it keeps its buffers, and forgets src.
func (c *canonParser) input(dst, src []byte) ([]byte, bool) {
	c.fastScan = fastScan{data: src}
	dst, ok := c.value(dst, 1)
	ok = ok && c.end()
	clear(c.members[:cap(c.members)])
	c.members, c.fastScan = c.members[:0], fastScan{}
	return dst, ok
}

const maxCanonDepth = 256

type canonParser struct {
	fastScan // data and position, whitespace
	// members is a stack of the open objects' members; scratch holds an
	// object's values while they are put in order.
	members []canonMember
	scratch []byte
	// escape is set by str when the string it read holds a character
	// json.Marshal escapes (<, >, &, U+2028, U+2029) written as it is.
	escape bool
}

type canonMember struct {
	key        []byte // raw, without quotes (no escapes)
	start, end int    // the canonical value, from the object's start in dst
}

func (c *canonParser) value(dst []byte, depth int) ([]byte, bool) {
	c.ws()
	if c.i >= len(c.data) || depth > maxCanonDepth {
		return dst, false
	}
	switch b := c.data[c.i]; {
	case b == '{':
		return c.object(dst, depth)
	case b == '[':
		return c.array(dst, depth)
	case b == '"':
		s, ok := c.str(false)
		if c.escape {
			return append(appendEscapedHTML(append(dst, '"'), s), '"'), ok
		}
		return append(append(append(dst, '"'), s...), '"'), ok
	case b == 't':
		return c.literal(dst, "true")
	case b == 'f':
		return c.literal(dst, "false")
	case b == 'n':
		return c.literal(dst, "null")
	case b == '-' || (b >= '0' && b <= '9'):
		n, ok := c.number() // as strict as JSON: the input is not checked before
		return append(dst, n...), ok
	}
	return dst, false
}

func (c *canonParser) literal(dst []byte, lit string) ([]byte, bool) {
	if !bytes.HasPrefix(c.data[c.i:], []byte(lit)) {
		return dst, false
	}
	c.i += len(lit)
	return append(dst, lit...), true
}

func (c *canonParser) array(dst []byte, depth int) ([]byte, bool) {
	c.i++
	dst = append(dst, '[')
	c.ws()
	if c.i < len(c.data) && c.data[c.i] == ']' {
		c.i++
		return append(dst, ']'), true
	}
	for first := true; ; first = false {
		if !first {
			dst = append(dst, ',')
		}
		var ok bool
		if dst, ok = c.value(dst, depth+1); !ok {
			return dst, false
		}
		c.ws()
		if c.i >= len(c.data) {
			return dst, false
		}
		switch c.data[c.i] {
		case ',':
			c.i++
		case ']':
			c.i++
			return append(dst, ']'), true
		default:
			return dst, false
		}
	}
}

// object writes the members' canonical values to dst as they come, then
// moves them into key order through the parser's scratch buffer (inner
// objects are done with it by then). At depth 0 (the request itself) the
// fields the digest leaves out are skipped. Members are kept on the
// parser's stack, so an object costs no allocation of its own.
func (c *canonParser) object(dst []byte, depth int) ([]byte, bool) {
	c.i++
	c.ws()
	if c.i < len(c.data) && c.data[c.i] == '}' {
		c.i++
		return append(dst, "{}"...), true
	}
	mark, base := len(dst), len(c.members)
	defer func() { c.members = c.members[:base] }()
	for {
		c.ws()
		if c.i >= len(c.data) || c.data[c.i] != '"' {
			return dst, false
		}
		key, ok := c.str(true)
		if !ok {
			return dst, false
		}
		c.ws()
		if c.i >= len(c.data) || c.data[c.i] != ':' {
			return dst, false
		}
		c.i++
		start := len(dst)
		if dst, ok = c.value(dst, depth+1); !ok {
			return dst, false
		}
		if depth > 0 || (string(key) != "created_at" && string(key) != "schema_version") {
			c.members = append(c.members, canonMember{key: key, start: start - mark, end: len(dst) - mark})
		}
		c.ws()
		if c.i >= len(c.data) {
			return dst, false
		}
		if c.data[c.i] == '}' {
			c.i++
			break
		}
		if c.data[c.i] != ',' {
			return dst, false
		}
		c.i++
	}
	c.scratch = append(c.scratch[:0], dst[mark:]...)
	dst = append(dst[:mark], '{')
	members := c.members[base:]
	slices.SortStableFunc(members, func(a, b canonMember) int { return bytes.Compare(a.key, b.key) })
	n := 0
	for k, m := range members {
		if k+1 < len(members) && bytes.Equal(m.key, members[k+1].key) {
			continue // a duplicate key: the last one stands
		}
		if n > 0 {
			dst = append(dst, ',')
		}
		n++
		dst = append(append(append(dst, '"'), m.key...), `":`...)
		dst = append(dst, c.scratch[m.start:m.end]...)
	}
	return append(dst, '}'), true
}

// canonEscapes are the escapes encoding/json writes back as they are read:
// decoding one and encoding the result gives the same bytes.
var canonEscapes = [][]byte{
	[]byte(`\"`), []byte(`\\`), []byte(`\n`), []byte(`\r`), []byte(`\t`),
	[]byte(`\u003c`), []byte(`\u003e`), []byte(`\u0026`), []byte(`\u2028`), []byte(`\u2029`),
}

// str reads the string at c.i and returns its contents as written. It
// reports false for anything encoding/json would write differently, but
// for the characters it escapes, which set c.escape (and, for a key, any
// escape or such character at all).
func (c *canonParser) str(key bool) ([]byte, bool) {
	c.i++
	c.escape = false
	start := c.i
	for c.i < len(c.data) {
		b := c.data[c.i]
		switch {
		case b == '"':
			s := c.data[start:c.i]
			c.i++
			return s, true
		case b == '\\':
			if key {
				return nil, false
			}
			n := 0
			for _, e := range canonEscapes {
				if bytes.HasPrefix(c.data[c.i:], e) {
					n = len(e)
					break
				}
			}
			if n == 0 {
				return nil, false
			}
			c.i += n
		case b < 0x20:
			return nil, false // not JSON
		case b == '<' || b == '>' || b == '&':
			if key {
				return nil, false
			}
			c.escape = true
			c.i++
		case b < utf8.RuneSelf:
			c.i++
		default:
			r, size := utf8.DecodeRune(c.data[c.i:])
			if r == utf8.RuneError {
				return nil, false // replaced by a decode
			}
			if r == '\u2028' || r == '\u2029' {
				if key {
					return nil, false
				}
				c.escape = true
			}
			c.i += size
		}
	}
	return nil, false
}

// appendEscapedHTML appends s, valid UTF-8 from a JSON string, with <, >,
// &, U+2028 and U+2029 escaped as json.Marshal escapes them.
func appendEscapedHTML(dst, s []byte) []byte {
	const hex = "0123456789abcdef"
	start := 0
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '<' || c == '>' || c == '&':
			dst = append(append(dst, s[start:i]...), '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			start = i + 1
		case c == 0xE2 && i+2 < len(s) && s[i+1] == 0x80 && (s[i+2] == 0xA8 || s[i+2] == 0xA9):
			dst = append(append(dst, s[start:i]...), '\\', 'u', '2', '0', '2', hex[s[i+2]&0xf])
			i += 2
			start = i + 1
		}
	}
	return append(dst, s[start:]...)
}
