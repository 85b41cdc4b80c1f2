package schemas

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

// check runs every test a message must pass before it is unmarshalled into
// its Go type, in the order the package documentation gives.
func check(id schemaID, data []byte) error {
	if len(data) > MaxPayloadBytes {
		return fmt.Errorf("%w: %d bytes (limit %d)", ErrTooLarge, len(data), MaxPayloadBytes)
	}
	if err := checkText(data); err != nil {
		return err
	}
	doc, err := parseObject(data)
	if err != nil {
		return err
	}
	if err := checkVersion(doc); err != nil {
		return err
	}
	s, err := schemaFor(id)
	if err != nil {
		return err
	}
	if err := s.Validate(doc); err != nil {
		return fromValidation(err)
	}
	return nil
}

// parseObject decodes data into the generic form the validator walks.
// Numbers stay json.Number so bounds are checked on the exact value.
func parseObject(data []byte) (map[string]any, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, notJSON(err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, &FieldError{Problem: "not valid JSON: data after the top-level value"}
	}
	obj, ok := v.(map[string]any)
	if !ok {
		return nil, &FieldError{Problem: "must be a JSON object"}
	}
	return obj, nil
}

func notJSON(err error) *FieldError {
	if errors.Is(err, io.EOF) {
		return &FieldError{Problem: "not valid JSON: empty"}
	}
	return &FieldError{Problem: "not valid JSON: " + err.Error()}
}

// checkVersion runs before the schema so that a message from a newer
// producer is reported as ErrUnknownVersion, not as a list of schema
// failures. The version must be an integer literal: 1.0 would pass a
// schema but not json.Unmarshal into an int.
func checkVersion(doc map[string]any) error {
	raw, ok := doc["schema_version"]
	if !ok {
		return &FieldError{Field: "schema_version", Problem: "is required"}
	}
	n, ok := raw.(json.Number)
	if !ok {
		return &FieldError{Field: "schema_version", Problem: "must be an integer"}
	}
	v, err := strconv.ParseInt(n.String(), 10, 64)
	if err != nil && !errors.Is(err, strconv.ErrRange) {
		return &FieldError{Field: "schema_version", Problem: "must be an integer without fraction or exponent"}
	}
	if err != nil || v != Version {
		return fmt.Errorf("%w: schema_version %s (this build knows %d)", ErrUnknownVersion, n, Version)
	}
	return nil
}

// checkText rejects what encoding/json would silently repair: bytes that
// are not valid UTF-8 (anywhere: in a key, a value, inside "input") and
// \u escapes of a lone UTF-16 surrogate, both of which it decodes as
// U+FFFD. A message is kept byte for byte or refused, never rewritten: two
// request ids that differ only in such bytes would otherwise become one.
func checkText(data []byte) error {
	if at, problem := badText(data); at >= 0 {
		return &FieldError{Problem: fmt.Sprintf("%s at byte %d", problem, at)}
	}
	return nil
}

// badText returns the offset of the first byte that is not text kept as
// it is, and why; -1 when every byte is.
func badText(data []byte) (int, string) {
	if !utf8.Valid(data) {
		for i := 0; i < len(data); {
			r, n := utf8.DecodeRune(data[i:])
			if r == utf8.RuneError && n <= 1 {
				return i, "not valid UTF-8"
			}
			i += n
		}
	}
	if at := loneSurrogate(data); at >= 0 {
		return at, "not valid UTF-8: \\u escape of a lone surrogate"
	}
	return -1, ""
}

// loneSurrogate returns the offset of the first \u escape of a UTF-16
// surrogate that is not half of a pair, or -1. Only "\u" is searched for
// (fast on text with other escapes); one preceded by an odd run of
// backslashes is an escaped backslash and a "u". Invalid escapes are the
// JSON parser's to report.
func loneSurrogate(data []byte) int {
	for i := 0; ; i += 2 {
		j := bytes.Index(data[i:], []byte(`\u`))
		if j < 0 {
			return -1
		}
		i += j
		if escapedAt(data, i) {
			continue
		}
		r, ok := hex4(data[i+2:])
		if !ok || !utf16.IsSurrogate(r) {
			continue
		}
		var low rune
		if r < 0xdc00 && len(data) >= i+8 && data[i+6] == '\\' && data[i+7] == 'u' {
			low, _ = hex4(data[i+8:])
		}
		if low < 0xdc00 || low > 0xdfff {
			return i
		}
		i += 10
	}
}

// escapedAt reports whether the backslash at i is itself escaped: preceded
// by an odd number of backslashes.
func escapedAt(data []byte, i int) bool {
	n := 0
	for i-n-1 >= 0 && data[i-n-1] == '\\' {
		n++
	}
	return n%2 == 1
}

// hex4 decodes the four hex digits at the start of b.
func hex4(b []byte) (rune, bool) {
	if len(b) < 4 {
		return 0, false
	}
	var r rune
	for _, c := range b[:4] {
		switch {
		case '0' <= c && c <= '9':
			r = r<<4 | rune(c-'0')
		case 'a' <= c && c <= 'f':
			r = r<<4 | rune(c-'a'+10)
		case 'A' <= c && c <= 'F':
			r = r<<4 | rune(c-'A'+10)
		default:
			return 0, false
		}
	}
	return r, true
}
