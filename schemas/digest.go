package schemas

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
)

// RequestDigest is the digest of req's content, "sha256:" and 64 hex
// digits: the SHA-256 of the request's JSON object without created_at and
// schema_version (the step deadline travels in a header and is not part of
// it either), with object keys sorted at every level, no insignificant
// whitespace and numbers as written (what encoding/json writes for a
// map). Two submits of one request id are the same request exactly when
// their digests are equal; submit paths refuse the second otherwise (a
// conflict).
//
// The canonical form is written straight from the request's encoding
// (canonicalJSON); only content that form does not cover (a string whose
// escapes encoding/json would write differently, a key with an escape)
// takes the slower re-encoding through a map, which defines the form.
func RequestDigest(req *PersonaRequest) string {
	data, err := json.Marshal(req)
	if err == nil {
		if canon, ok := canonicalJSON(make([]byte, 0, len(data)), data); ok {
			data = canon
		} else {
			data, err = canonicalContent(data)
		}
	}
	if err != nil { // only an input that is not JSON: digest what there is
		data = append([]byte(req.RequestID+"\x00"), req.Input...)
	}
	sum := sha256.Sum256(data)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// canonicalContent re-encodes a request's JSON without its created_at and
// schema_version, keys sorted, numbers kept as written. It defines the
// digest's canonical form; canonicalJSON writes the same bytes faster.
func canonicalContent(data []byte) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil {
		return nil, err
	}
	delete(m, "created_at")
	delete(m, "schema_version")
	return json.Marshal(m)
}
