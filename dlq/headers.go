package dlq

import (
	"encoding/base64"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/nats-io/nats.go"
)

// HeaderBase64Prefix marks a header name or value a record stores as
// standard base64 because JSON cannot carry it as it is: it is not valid
// UTF-8 (JSON would turn those bytes into U+FFFD). A value that itself
// starts with the prefix is encoded too, so decoding is never ambiguous.
// Replays restore the original bytes.
const HeaderBase64Prefix = "personaq-base64:"

// encodeHeaders returns the record form of h: every name and value kept
// as it is when JSON can carry it, else HeaderBase64Prefix + base64.
func encodeHeaders(h map[string][]string) map[string][]string {
	if len(h) == 0 {
		return nil
	}
	out := make(map[string][]string, len(h))
	for k, vs := range h {
		enc := make([]string, len(vs))
		for i, v := range vs {
			enc[i] = StoredHeaderText(v)
		}
		out[StoredHeaderText(k)] = enc
	}
	return out
}

// StoredHeaderText is the form a record stores a header name or value in:
// s itself when it is valid UTF-8 (and does not start with
// HeaderBase64Prefix), else HeaderBase64Prefix and its standard base64.
func StoredHeaderText(s string) string {
	if utf8.ValidString(s) && !strings.HasPrefix(s, HeaderBase64Prefix) {
		return s
	}
	return HeaderBase64Prefix + base64.StdEncoding.EncodeToString([]byte(s))
}

// decodeHeaders turns the record form back into the original headers.
func decodeHeaders(h map[string][]string) (nats.Header, error) {
	out := make(nats.Header, len(h))
	for k, vs := range h {
		name, err := decodeHeaderText(k)
		if err != nil {
			return nil, fmt.Errorf("header name %q: %w", k, err)
		}
		dec := make([]string, len(vs))
		for i, v := range vs {
			if dec[i], err = decodeHeaderText(v); err != nil {
				return nil, fmt.Errorf("header %s: %w", name, err)
			}
		}
		out[name] = append(out[name], dec...)
	}
	return out, nil
}

func decodeHeaderText(s string) (string, error) {
	enc, ok := strings.CutPrefix(s, HeaderBase64Prefix)
	if !ok {
		return s, nil
	}
	b, err := base64.StdEncoding.DecodeString(enc)
	if err != nil {
		return "", fmt.Errorf("%w: bad base64 after %s: %w", ErrPayloadCorrupt, HeaderBase64Prefix, err)
	}
	return string(b), nil
}
