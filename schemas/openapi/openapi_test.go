package openapi_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/pb33f/libopenapi"
	validator "github.com/pb33f/libopenapi-validator"
	"github.com/stretchr/testify/require"

	"github.com/personaq/personaq/schemas/openapi"
)

// TestDocumentIsValidOpenAPI31 parses and validates the document with a
// maintained OpenAPI 3.1 library.
func TestDocumentIsValidOpenAPI31(t *testing.T) {
	t.Parallel()
	doc, err := libopenapi.NewDocument(openapi.Document)
	require.NoError(t, err)
	require.Equal(t, "3.1.0", doc.GetVersion())
	model, err := doc.BuildV3Model()
	require.NoError(t, err)
	require.NotNil(t, model)
	v, errs := validator.NewValidator(doc)
	require.Empty(t, errs)
	ok, verrs := v.ValidateDocument()
	require.True(t, ok, "%v", verrs)
}

// TestMessageSchemasMatchTheWireSchemas: the record and attempt event
// schemas in the document are the NATS wire format's (schemas/json), and
// the submit body is the request's with every field optional but persona
// and task_id, plus deadline.
func TestMessageSchemasMatchTheWireSchemas(t *testing.T) {
	t.Parallel()
	var doc struct {
		Components struct {
			Schemas map[string]map[string]any `json:"schemas"`
		} `json:"components"`
	}
	require.NoError(t, json.Unmarshal(openapi.Document, &doc))
	for name, file := range map[string]string{"OutcomeEvent": "outcome_event.v1.json", "AttemptEvent": "attempt_event.v1.json", "OutputChunk": "output_chunk.v1.json"} {
		want := wire(t, file)
		require.Equal(t, want, doc.Components.Schemas[name], name)
	}
	req := wire(t, "persona_request.v1.json")
	body := doc.Components.Schemas["SubmitRequest"]
	require.Equal(t, []any{"persona", "task_id"}, body["required"])
	require.Equal(t, false, body["additionalProperties"])
	props := body["properties"].(map[string]any)
	for k, v := range req["properties"].(map[string]any) {
		got := props[k].(map[string]any)
		for kk, vv := range v.(map[string]any) {
			if kk != "description" {
				require.Equal(t, vv, got[kk], "%s.%s", k, kk)
			}
		}
	}
	require.Contains(t, props, "deadline")
	require.Len(t, props, len(req["properties"].(map[string]any))+1)
}

func wire(t *testing.T, file string) map[string]any {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("..", "json", file))
	require.NoError(t, err)
	var m map[string]any
	require.NoError(t, json.Unmarshal(raw, &m))
	delete(m, "$schema")
	delete(m, "$id")
	return m
}
