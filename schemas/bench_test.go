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
