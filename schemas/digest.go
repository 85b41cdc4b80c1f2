package schemas

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"time"
)

// RequestDigest is the digest of req's content: every field except
// created_at and schema_version (and the step deadline, which travels in a
// header), with the input's JSON canonicalised (object keys sorted, no
// insignificant whitespace), as "sha256:" and 64 hex digits. Two submits
// of one request id are the same request exactly when their digests are
// equal; submit paths refuse the second otherwise (a conflict).
func RequestDigest(req *PersonaRequest) string {
	c := *req
	c.SchemaVersion, c.CreatedAt = 0, time.Time{}
	c.Input = canonicalJSON(c.Input)
	data, err := json.Marshal(&c)
	if err != nil { // only an input that is not JSON; digest its bytes as they are
		c.Input = nil
		data, _ = json.Marshal(&c)
		data = append(data, req.Input...)
	}
	sum := sha256.Sum256(data)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// canonicalJSON re-encodes raw with sorted object keys and numbers kept as
// written; raw that is not JSON is returned as it is.
func canonicalJSON(raw json.RawMessage) json.RawMessage {
	if len(raw) == 0 {
		return raw
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return raw
	}
	out, err := json.Marshal(v)
	if err != nil {
		return raw
	}
	return out
}
