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
		v, err := dec.Token()
		s, isString := v.(string)
		if err != nil || !isString || s == "" || len(s) > maxRequestIDLen || !utf8.ValidString(s) {
			return "", false
		}
		return s, true
	}
	return "", false
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
