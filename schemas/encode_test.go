package schemas_test

import (
	"encoding/json"
	"regexp"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/personaq/personaq/schemas"
)

func TestEncodeAcceptsValuesAndPointers(t *testing.T) {
	t.Parallel()
	for _, msg := range []any{
		validRequest(), *validRequest(), validOutcome(), *validOutcome(),
		validQuarantineRecord(), *validQuarantineRecord(), validCompensation(), *validCompensation(),
	} {
		_, err := schemas.Encode(msg)
		require.NoError(t, err, "%T", msg)
	}
}

func TestEncodeRejectsWhatDecodeWouldReject(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		msg     func() any
		field   string
		version bool
	}{
		{"UnsafePersona", func() any { r := validRequest(); r.Persona = "a.b"; return r }, "persona", false},
		{"FallbackWithoutPrimary", func() any { r := validRequest(); r.Agents.Primary = ""; return r }, "agents.primary", false},
		{"NegativeProgressTotal", func() any { r := validRequest(); r.ProgressTotal = -1; return r }, "progress_total", false},
		{"EmptyQuarantineDetail", func() any { q := validQuarantineRecord(); q.Detail = ""; return q }, "detail", false},
		{"UnknownReason", func() any { q := validQuarantineRecord(); q.Reason = "bored"; return q }, "reason", false},
		{"UnknownOutcome", func() any { o := validOutcome(); o.Outcome = "done"; return o }, "outcome", false},
		{"LowercaseKind", func() any { c := validCompensation(); c.Kind = "undo"; return c }, "kind", false},
		{"VersionNotSet", func() any { r := validRequest(); r.SchemaVersion = 0; return r }, "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := schemas.Encode(tt.msg())
			if tt.version {
				require.ErrorIs(t, err, schemas.ErrUnknownVersion)
				return
			}
			var fe *schemas.FieldError
			require.ErrorAs(t, err, &fe)
			require.Equal(t, tt.field, fe.Field)
			require.ErrorIs(t, err, schemas.ErrInvalid)
		})
	}
}

func TestEncodeUnknownType(t *testing.T) {
	t.Parallel()
	for _, v := range []any{nil, 42, map[string]any{"schema_version": 1}, schemas.AttemptRecord{}} {
		_, err := schemas.Encode(v)
		require.ErrorIs(t, err, schemas.ErrInvalid, "%T", v)
	}
}

func TestEncodeNilPointer(t *testing.T) {
	t.Parallel()
	_, err := schemas.Encode((*schemas.PersonaRequest)(nil))
	require.ErrorIs(t, err, schemas.ErrInvalid)
}

func TestEncodeInvalidRawInput(t *testing.T) {
	t.Parallel()
	r := validRequest()
	r.Input = json.RawMessage(`{not json`)
	_, err := schemas.Encode(r)
	require.Error(t, err)
}

func TestNewRequest(t *testing.T) {
	t.Parallel()
	before := time.Now()
	a := schemas.NewRequest("T-1", "plan", "planner")
	b := schemas.NewRequest("T-1", "plan", "planner")
	require.Equal(t, schemas.Version, a.SchemaVersion)
	require.Regexp(t, regexp.MustCompile(`^[0-9a-f-]{36}$`), a.RequestID)
	require.NotEqual(t, a.RequestID, b.RequestID)
	require.Equal(t, time.UTC, a.CreatedAt.Location())
	require.WithinRange(t, a.CreatedAt, before.Add(-time.Second), time.Now().Add(time.Second))
	_, err := schemas.Encode(a)
	require.NoError(t, err)
}

// schemas.Encode refuses text that is not valid UTF-8 instead of publishing it
// rewritten (json.Marshal would turn the bytes into U+FFFD).
func TestEncodeRefusesInvalidUTF8(t *testing.T) {
	t.Parallel()
	for name, mutate := range map[string]func(*schemas.PersonaRequest){
		"request_id": func(r *schemas.PersonaRequest) { r.RequestID = "req-\xff\xfe" },
		"input":      func(r *schemas.PersonaRequest) { r.Input = []byte("\"\xff\"") },
		"policy_overrides.non_retryable": func(r *schemas.PersonaRequest) {
			r.PolicyOverrides = &schemas.PolicyOverrides{NonRetryable: []string{"Commit\xffError"}}
		},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			r := schemas.NewRequest("t", "s", "p")
			mutate(r)
			_, err := schemas.Encode(r)
			var fe *schemas.FieldError
			require.ErrorAs(t, err, &fe)
			require.Equal(t, name, fe.Field)
			require.ErrorIs(t, err, schemas.ErrInvalid)
		})
	}
	_, err := schemas.Encode(&schemas.CompensationRequest{SchemaVersion: schemas.Version, RequestID: "r", SagaID: "s\xff", Kind: schemas.CompensationDeleteBranch, Target: "b"})
	require.ErrorIs(t, err, schemas.ErrInvalid)
}
