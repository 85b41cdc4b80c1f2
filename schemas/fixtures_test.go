package schemas_test

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/personaq/personaq/schemas"
)

var at = time.Date(2025, 3, 4, 5, 6, 7, 890_000_000, time.UTC)

func validRequest() *schemas.PersonaRequest {
	return &schemas.PersonaRequest{
		SchemaVersion: schemas.Version,
		RequestID:     "req-1",
		TaskID:        "TASK-42",
		Step:          "plan",
		Persona:       "lead-engineer",
		Agents:        schemas.Agents{Primary: "claude", Fallback: "codex"},
		Input:         json.RawMessage(`{"goal":"ship it"}`),
		Policy:        "llm",
		PolicyOverrides: &schemas.PolicyOverrides{
			MaxAttempts: 4, AttemptTimeoutMs: 60_000,
			BackoffMs: []int64{0, 30_000}, NonRetryable: []string{"AuthError"},
		},
		ProgressTotal: 5,
		CorrelationID: "corr-9",
		CreatedAt:     at,
	}
}

func validOutcome() *schemas.OutcomeEvent {
	return &schemas.OutcomeEvent{
		SchemaVersion: schemas.Version, RequestID: "req-1", TaskID: "TASK-42",
		Step: "plan", Persona: "planner", Outcome: schemas.OutcomeQuarantined,
		Reason: schemas.ReasonExhausted, Attempts: 4, Agent: "codex",
		Progress: &schemas.Progress{Completed: 2, Total: 5}, LastError: "boom",
		DurationMs: 1234, CorrelationID: "corr-9", QuarantineSeq: 17, At: at,
	}
}

func validQuarantineRecord() *schemas.QuarantineRecord {
	return &schemas.QuarantineRecord{
		SchemaVersion: schemas.Version, ID: "q-1", Reason: schemas.ReasonCompensationFailed,
		Detail: "DELETE_BRANCH failed: branch is checked out", OriginalSubject: "personaq.requests.planner",
		Headers: map[string][]string{"Nats-Msg-Id": {"req-1"}},
		Payload: []byte("\x00not even json\xff"), Stream: "REQUESTS", Sequence: 99,
		Deliveries: 3, Attempts: 2,
		Errors: []schemas.AttemptRecord{{
			Attempt: 1, Agent: "claude", Class: "retryable", ErrorType: "APIError",
			Error: "529 overloaded", Progress: &schemas.Progress{Completed: 1, Total: 5},
			DurationMs: 800, At: at,
		}},
		RequestID: "req-1", TaskID: "TASK-42", Step: "plan", Persona: "planner",
		SagaID: "saga-7", CorrelationID: "corr-9", FirstFailureAt: at, LastFailureAt: at,
		QuarantinedAt: at, Lineage: &schemas.Lineage{ReplayOf: "q-0", ReplayCount: 1, OriginalRequestID: "req-0"},
	}
}

func validCompensation() *schemas.CompensationRequest {
	return &schemas.CompensationRequest{
		SchemaVersion: schemas.Version, RequestID: "req-2", SagaID: "saga-7",
		Kind: schemas.CompensationDeleteBranch, Target: "feature/login", TaskID: "TASK-42",
		Args: json.RawMessage(`{"force":true}`), CorrelationID: "corr-9", CreatedAt: at,
	}
}

// asMap is msg as the generic JSON object a mutation edits.
func asMap(t *testing.T, msg any) map[string]any {
	t.Helper()
	data, err := json.Marshal(msg)
	require.NoError(t, err)
	var m map[string]any
	require.NoError(t, json.Unmarshal(data, &m))
	return m
}

// mutated is msg as JSON with the dotted path set to v, or deleted when v
// is the deleted marker.
func mutated(t *testing.T, msg any, path string, v any) []byte {
	t.Helper()
	m := asMap(t, msg)
	keys := strings.Split(path, ".")
	var parent any = m
	for _, k := range keys[:len(keys)-1] {
		parent = child(t, parent, k)
	}
	obj, ok := parent.(map[string]any)
	require.True(t, ok, "parent of %s is not an object", path)
	if v == deleted {
		delete(obj, keys[len(keys)-1])
	} else {
		obj[keys[len(keys)-1]] = v
	}
	data, err := json.Marshal(m)
	require.NoError(t, err)
	return data
}

func child(t *testing.T, parent any, key string) any {
	t.Helper()
	if arr, ok := parent.([]any); ok {
		i, err := strconv.Atoi(key)
		require.NoError(t, err)
		return arr[i]
	}
	return parent.(map[string]any)[key]
}

type deletedMarker struct{}

var deleted = deletedMarker{}
