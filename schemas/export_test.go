package schemas

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
)

// Hooks for the external tests: the fast paths alone and the full
// (schema-validating) paths alone.
var (
	FastDecodeRequest = fastDecodeRequest
	FastDecodeOutcome = fastDecodeOutcome
)

func FullDecodeRequest(data []byte) (*PersonaRequest, error) {
	return decode[PersonaRequest](requestSchema, data)
}

func FullDecodeOutcome(data []byte) (*OutcomeEvent, error) {
	return decode[OutcomeEvent](outcomeSchema, data)
}

// RequestDigestBefore is RequestDigest as it was written before the
// canonical form was produced without a map: every record stored so far
// carries its value, so the two must agree on every request.
func RequestDigestBefore(req *PersonaRequest) string {
	data, err := json.Marshal(req)
	if err == nil {
		dec := json.NewDecoder(bytes.NewReader(data))
		dec.UseNumber()
		var m map[string]any
		if err = dec.Decode(&m); err == nil {
			delete(m, "created_at")
			delete(m, "schema_version")
			data, err = json.Marshal(m)
		}
	}
	if err != nil {
		data = append([]byte(req.RequestID+"\x00"), req.Input...)
	}
	sum := sha256.Sum256(data)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// CanonicalJSON is the fast canonical form alone (false: not covered).
func CanonicalJSON(src []byte) ([]byte, bool) { return canonicalJSON(nil, src) }

// CanonicalRequest is RequestDigest's direct canonical form alone (false:
// not covered), and CanonicalRequestBefore the form it must equal.
func CanonicalRequest(req *PersonaRequest) ([]byte, bool) {
	return new(digester).canonicalRequest(req)
}

func CanonicalRequestBefore(req *PersonaRequest) []byte { return canonicalOrRaw(req) }
