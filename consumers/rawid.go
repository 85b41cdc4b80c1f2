package consumers

import (
	"bytes"
	"encoding/json"
	"unicode/utf8"
)

// maxRequestIDLen is the longest request id a request may carry.
const maxRequestIDLen = 256

// rawRequestID reads the top-level "request_id" of a payload that did not
// decode as a request (too large, a field of the wrong type, broken JSON
// after the id), so that its terminal record is stored under the id its
// caller waits on. It reads tokens up to that key only; ok is false when
// the bytes do not reach a usable id.
func rawRequestID(payload []byte) (id string, ok bool) {
	dec := json.NewDecoder(bytes.NewReader(payload))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return "", false
	}
	for dec.More() {
		key, err := dec.Token()
		if err != nil {
			return "", false
		}
		if key != "request_id" {
			if skipValue(dec) != nil {
				return "", false
			}
			continue
		}
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return "", false
		}
		return exactString(raw)
	}
	return "", false
}

// exactString is the text of a JSON string token taken byte for byte: the
// decoder would turn invalid UTF-8 and lone surrogates into U+FFFD, and two
// different ids into one key. A string with escapes, invalid UTF-8 or an
// unusable length is not taken.
func exactString(raw []byte) (string, bool) {
	n := len(raw)
	if n < 3 || raw[0] != '"' || raw[n-1] != '"' || n-2 > maxRequestIDLen {
		return "", false
	}
	body := raw[1 : n-1]
	if bytes.IndexByte(body, '\\') >= 0 || !utf8.Valid(body) {
		return "", false
	}
	return string(body), true
}

// skipValue reads past one value without keeping it.
func skipValue(dec *json.Decoder) error {
	depth := 0
	for {
		t, err := dec.Token()
		if err != nil {
			return err
		}
		switch t {
		case json.Delim('{'), json.Delim('['):
			depth++
		case json.Delim('}'), json.Delim(']'):
			depth--
		}
		if depth == 0 {
			return nil
		}
	}
}
