package schemas_test

import (
	"encoding/json"
	"testing"

	"github.com/personaq/personaq/schemas"
)

func BenchmarkDecodeRequest(b *testing.B) {
	benchmarks := []struct {
		name string
		msg  *schemas.PersonaRequest
	}{
		{"Minimal", schemas.NewRequest("TASK-42", "plan", "planner")},
		{"Full", validRequest()},
		{"Budgeted", budgetedRequest()},
	}
	for _, bm := range benchmarks {
		data, err := schemas.Encode(bm.msg)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(bm.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(data)))
			for b.Loop() {
				if _, err := schemas.DecodeRequest(data); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkUnmarshalRequest is the floor: json.Unmarshal alone, no checks.
func BenchmarkUnmarshalRequest(b *testing.B) {
	data, err := schemas.Encode(validRequest())
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		var r schemas.PersonaRequest
		if err := json.Unmarshal(data, &r); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkEncodeOutcome(b *testing.B) {
	msg := validOutcome()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := schemas.Encode(msg); err != nil {
			b.Fatal(err)
		}
	}
}

// budgetedRequest is validRequest with a token and cost budget.
func budgetedRequest() *schemas.PersonaRequest {
	r := validRequest()
	r.Budget = &schemas.Budget{MaxTokens: 200_000, MaxCostUSD: 2.5}
	return r
}

// pipelineRequest is a request as the runtime's pipeline benchmark sends
// it: two agents and a ~200-byte input.
func pipelineRequest() *schemas.PersonaRequest {
	r := schemas.NewRequest("bench-task-00000042", "implement", "bench")
	r.Agents = schemas.Agents{Primary: "claude-sonnet", Fallback: "gpt-5"}
	r.Input = json.RawMessage(`{"prompt":"Implement the retry budget for the planner persona and add table-driven tests for linear, exponential and list schedules; keep the public API unchanged.","files":["retry/budget.go","retry/budget_test.go"]}`)
	return r
}

// BenchmarkDecodeRequestPipeline decodes (and so validates) the request
// every delivery of the pipeline benchmark decodes.
func BenchmarkDecodeRequestPipeline(b *testing.B) {
	data, err := schemas.Encode(pipelineRequest())
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		if _, err := schemas.DecodeRequest(data); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkEncodeRequest is what a producer pays to publish a request:
// marshal and validate.
func BenchmarkEncodeRequest(b *testing.B) {
	for _, bm := range []struct {
		name string
		msg  *schemas.PersonaRequest
	}{{"Pipeline", pipelineRequest()}, {"Budgeted", budgetedRequest()}} {
		b.Run(bm.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := schemas.Encode(bm.msg); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// terminalOutcome is a succeeded request's terminal record as the runtime
// writes it: an inline output and the request's digest.
func terminalOutcome() *schemas.OutcomeEvent {
	req := pipelineRequest()
	return &schemas.OutcomeEvent{
		SchemaVersion: schemas.Version, RequestID: req.RequestID, TaskID: req.TaskID, Step: req.Step,
		Persona: req.Persona, Outcome: schemas.OutcomeSucceeded, Attempts: 1, Agent: "claude-sonnet",
		DurationMs: 3, At: at, Output: json.RawMessage(`{"ok":true,"echo":"done"}`), SubmittedAt: req.CreatedAt,
		RequestDigest: schemas.RequestDigest(req),
	}
}

func BenchmarkDecodeOutcome(b *testing.B) {
	data, err := schemas.MarshalOutcome(terminalOutcome())
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := schemas.DecodeOutcome(data); err != nil {
			b.Fatal(err)
		}
	}
}
