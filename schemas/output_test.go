package schemas_test

import (
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/personaq/personaq/schemas"
)

// TestMarshalOutputChunk holds MarshalOutputChunk to json.Marshal, byte for
// byte, and every chunk it writes to the schema.
func TestMarshalOutputChunk(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 27, 3, 4, 5, 600, time.UTC)
	tests := []struct {
		name string
		c    schemas.OutputChunk
	}{
		{"Chunk", schemas.OutputChunk{SchemaVersion: 1, RequestID: "req-1", Attempt: 1, Offset: 4096, Data: "Hello, <world> & \"you\"\n", At: now}},
		{"Escapes", schemas.OutputChunk{SchemaVersion: 1, RequestID: "req \u2028", Attempt: 2, Data: "\xff\x00\t\u2029é", At: now.In(time.FixedZone("", -3600))}},
		{"Truncated", schemas.OutputChunk{SchemaVersion: 1, RequestID: "r", Attempt: 1, Offset: 1 << 20, Truncated: 17, At: now}},
		{"Final", schemas.OutputChunk{SchemaVersion: 1, RequestID: "r", Attempt: 3, Offset: 12, Data: "tail", Final: true, Truncated: 9, At: now}},
		{"Supersedes", schemas.OutputChunk{SchemaVersion: 1, RequestID: "r", Attempt: 2, Supersedes: 1, At: now}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			want, err := json.Marshal(&tt.c)
			require.NoError(t, err)
			got := schemas.MarshalOutputChunk(&tt.c)
			require.Equal(t, string(want), string(got))
			back, err := schemas.DecodeOutputChunk(got)
			require.NoError(t, err)
			require.Equal(t, tt.c.Offset, back.Offset)
		})
	}
}

// TestDecodeOutputChunkRefuses: what the schema refuses is a FieldError
// naming the field.
func TestDecodeOutputChunkRefuses(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, doc, field string
	}{
		{"AttemptZero", `{"schema_version":1,"request_id":"r","attempt":0,"offset":0,"data":"","at":"2026-11-27T03:04:05Z"}`, "attempt"},
		{"NegativeOffset", `{"schema_version":1,"request_id":"r","attempt":1,"offset":-1,"data":"","at":"2026-11-27T03:04:05Z"}`, "offset"},
		{"NoData", `{"schema_version":1,"request_id":"r","attempt":1,"offset":0,"at":"2026-11-27T03:04:05Z"}`, "data"},
		{"Unknown", `{"schema_version":1,"request_id":"r","attempt":1,"offset":0,"data":"","at":"2026-11-27T03:04:05Z","x":1}`, "x"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := schemas.DecodeOutputChunk([]byte(tt.doc))
			var fe *schemas.FieldError
			require.True(t, errors.As(err, &fe), "%v", err)
			require.Contains(t, fe.Field, tt.field)
		})
	}
}

func TestOutputSubjects(t *testing.T) {
	t.Parallel()
	require.Equal(t, "personaq.output.req-1.2", schemas.OutputSubject(schemas.DefaultOutputPrefix, "req-1", 2))
	require.Equal(t, "personaq.output.req-1.*", schemas.OutputFilter(schemas.DefaultOutputPrefix, "req-1"))
}
