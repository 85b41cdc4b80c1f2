package schemas_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/personaq/personaq/schemas"
)

// TestRequestDigest: created_at, schema_version and the input's key order
// and spacing do not change the digest; every field of content does.
func TestRequestDigest(t *testing.T) {
	t.Parallel()
	base := func() *schemas.PersonaRequest {
		r := schemas.NewRequest("story-42", "plan", "echo")
		r.RequestID, r.Input = "req-1", json.RawMessage(`{"a":1,"b":[1,2]}`)
		return r
	}
	want := schemas.RequestDigest(base())
	require.Regexp(t, `^sha256:[0-9a-f]{64}$`, want)

	same := base()
	same.CreatedAt, same.SchemaVersion = time.Now().Add(time.Hour), 7
	same.Input = json.RawMessage(" {\"b\": [1, 2],\n \"a\": 1}")
	require.Equal(t, want, schemas.RequestDigest(same))

	for name, change := range map[string]func(*schemas.PersonaRequest){
		"Input":    func(r *schemas.PersonaRequest) { r.Input = json.RawMessage(`{"a":2,"b":[1,2]}`) },
		"Step":     func(r *schemas.PersonaRequest) { r.Step = "main" },
		"Persona":  func(r *schemas.PersonaRequest) { r.Persona = "flaky" },
		"Task":     func(r *schemas.PersonaRequest) { r.TaskID = "story-43" },
		"Agents":   func(r *schemas.PersonaRequest) { r.Agents.Primary = "agent-a" },
		"Policy":   func(r *schemas.PersonaRequest) { r.Policy = "fast" },
		"Progress": func(r *schemas.PersonaRequest) { r.ProgressTotal = 9 },
		"Budget":   func(r *schemas.PersonaRequest) { r.Budget = &schemas.Budget{MaxTokens: 10} },
		"Number":   func(r *schemas.PersonaRequest) { r.Input = json.RawMessage(`{"a":1.0,"b":[1,2]}`) },
	} {
		r := base()
		change(r)
		require.NotEqual(t, want, schemas.RequestDigest(r), name)
	}
}
