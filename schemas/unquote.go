package schemas

import (
	"bytes"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// unquote writes the contents of a JSON string, as str scanned them, the
// way encoding/json decodes them. Where json would write U+FFFD for a
// surrogate escape that is not half of a pair, it returns false instead
// (isText refuses such text anyway). Bytes other than escapes are copied:
// isText has checked they are valid UTF-8, which json keeps as it is.
func unquote(b *strings.Builder, raw []byte) bool {
	for {
		i := bytes.IndexByte(raw, '\\')
		if i < 0 {
			b.Write(raw)
			return true
		}
		b.Write(raw[:i])
		raw = raw[i:]
		if len(raw) < 2 {
			return false
		}
		if raw[1] == 'u' {
			r, n := unicodeEscape(raw)
			if n == 0 {
				return false
			}
			b.WriteRune(r)
			raw = raw[n:]
			continue
		}
		c, ok := shortEscape(raw[1])
		if !ok {
			return false
		}
		b.WriteByte(c)
		raw = raw[2:]
	}
}

// unicodeEscape decodes the \uXXXX (or surrogate pair \uXXXX\uXXXX) that
// raw starts with, and returns the rune and the bytes it took; 0 bytes if
// it is not one.
func unicodeEscape(raw []byte) (rune, int) {
	r, ok := hex4(raw[2:])
	if !ok {
		return 0, 0
	}
	if !utf16.IsSurrogate(r) {
		return r, 6
	}
	if len(raw) < 12 || raw[6] != '\\' || raw[7] != 'u' {
		return 0, 0
	}
	low, ok := hex4(raw[8:])
	if r = utf16.DecodeRune(r, low); !ok || r == utf8.RuneError {
		return 0, 0
	}
	return r, 12
}

// shortEscape is the byte a two-character escape \c stands for.
func shortEscape(c byte) (byte, bool) {
	switch c {
	case '"', '\\', '/':
		return c, true
	case 'b':
		return '\b', true
	case 'f':
		return '\f', true
	case 'n':
		return '\n', true
	case 'r':
		return '\r', true
	case 't':
		return '\t', true
	}
	return 0, false
}
