package schemas_test

import (
	"encoding/json"
	"errors"
	"reflect"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/stretchr/testify/require"

	"github.com/personaq/personaq/schemas"
)

func FuzzDecodeRequest(f *testing.F) {
	seedFuzz(f, validRequest())
	f.Add([]byte(`{"schema_version":1,"request_id":"r","task_id":"t","step":"s","persona":"p","created_at":"2025-01-01T00:00:00Z","progress_total":1e2}`))
	f.Add([]byte(`{"schema_version":1,"request_id":"r","task_id":"t","step":"s","persona":"p","created_at":"2025-01-01T00:00:00+23:59","input":null,"policy_overrides":{}}`))
	f.Add([]byte(`{"schema_version":1,"request_id":"r","task_id":"t","step":"s","persona":"p","PERSONA":"a.b","created_at":"2025-01-01T00:00:00Z"}`))
	for _, s := range fastSeedsRequest {
		f.Add([]byte(s))
	}
	for _, c := range fastRequestCases {
		f.Add([]byte(c.json))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		checkDecoded(t, data, schemas.DecodeRequest)
		requireFastSound(t, data, schemas.FastDecodeRequest, schemas.FullDecodeRequest)
		requireSameAnswer(t, data)
	})
}

func FuzzDecodeQuarantineRecord(f *testing.F) {
	seedFuzz(f, validQuarantineRecord())
	f.Add([]byte(`{"schema_version":1,"id":"q","reason":"terminal","detail":"d","original_subject":"s","payload":"QQ==\n","attempts":0,"quarantined_at":"2025-01-01T00:00:00Z","headers":{}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		checkDecoded(t, data, schemas.DecodeQuarantineRecord)
	})
}

// seedFuzz adds a valid message, then broken variants of it.
func seedFuzz(f *testing.F, msg any) {
	valid, err := schemas.Encode(msg)
	require.NoError(f, err)
	f.Add(valid)
	f.Add(valid[:len(valid)/2])
	f.Add([]byte(`{"schema_version":2}`))
	f.Add([]byte(`{"schema_version":1.0}`))
	f.Add([]byte(`[]`))
	f.Add([]byte("\xff\x00"))
	f.Add([]byte{})
}

// checkDecoded holds for any input: decoding never panics, fails only
// with this package's errors, and what it accepts encodes and decodes back
// to the same value.
func checkDecoded[T any](t *testing.T, data []byte, decode func([]byte) (*T, error)) {
	got, err := decode(data)
	if err != nil {
		require.True(t, errors.Is(err, schemas.ErrInvalid) ||
			errors.Is(err, schemas.ErrUnknownVersion) || errors.Is(err, schemas.ErrTooLarge), "%v", err)
		return
	}
	again, err := schemas.Encode(got)
	require.NoError(t, err, "input: %q", data)
	back, err := decode(again)
	require.NoError(t, err, "re-encoded: %q", again)
	require.Empty(t, cmp.Diff(got, back, sameJSON, equateEmpty))
}

var rawMessage = reflect.TypeFor[json.RawMessage]()

func isRawMessage(p cmp.Path) bool { return p.Last().Type() == rawMessage }

// sameJSON compares raw JSON by meaning: Marshal compacts and escapes it.
// The filter keeps it off plain []byte, which is assignable to RawMessage.
var sameJSON = cmp.FilterPath(isRawMessage, cmp.Transformer("json", func(r json.RawMessage) any {
	var v any
	if err := json.Unmarshal(r, &v); err != nil {
		return string(r)
	}
	return v
}))

// equateEmpty treats nil and empty maps and slices alike (omitempty drops
// both), except raw JSON, which sameJSON compares.
var equateEmpty = cmp.FilterPath(func(p cmp.Path) bool { return !isRawMessage(p) }, cmpopts.EquateEmpty())
