package schemas

import (
	"encoding/json"
	"os"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestSchemasCompile(t *testing.T) {
	t.Parallel()
	for id := range numSchemas {
		s, err := schemaFor(id)
		require.NoError(t, err)
		require.NotNil(t, s)
	}
}

// The enums in the schema files repeat the Go constants; this keeps them
// from drifting apart.
func TestSchemaEnumsMatchGo(t *testing.T) {
	t.Parallel()
	reasons := make([]any, len(Reasons))
	for i, r := range Reasons {
		reasons[i] = string(r)
	}
	outcomes := make([]any, len(Outcomes))
	for i, o := range Outcomes {
		outcomes[i] = string(o)
	}
	tests := []struct {
		name  string
		file  string
		field string
		want  []any
	}{
		{"QuarantineReason", schemaFiles[quarantineSchema], "reason", reasons},
		{"OutcomeReason", schemaFiles[outcomeSchema], "reason", reasons},
		{"Outcome", schemaFiles[outcomeSchema], "outcome", outcomes},
		{"AttemptKind", schemaFiles[attemptSchema], "kind", []any{string(AttemptStarted), string(AttemptFailed), string(AttemptWaiting)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			raw, err := os.ReadFile(tt.file)
			require.NoError(t, err)
			var doc struct {
				Properties map[string]struct {
					Enum []any `json:"enum"`
				} `json:"properties"`
			}
			require.NoError(t, json.Unmarshal(raw, &doc))
			require.Equal(t, tt.want, doc.Properties[tt.field].Enum)
		})
	}
}
