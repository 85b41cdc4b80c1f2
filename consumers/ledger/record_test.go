package ledger

import (
	"encoding/json"
	"math"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestRecordAppendJSON holds the hand-written encoder to json.Marshal,
// byte for byte: the scripts find records by their prefix, and stored
// records must not change with the encoder.
func TestRecordAppendJSON(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		r    record
	}{
		{"Zero", record{}},
		{"Minimal", record{Attempt: 1, Class: "succeeded", DurationMS: 12, AtMS: 1_700_000_000_000}},
		{"Full", record{
			Attempt: 3, Lost: true, Role: "fallback", Agent: "claude", Class: "validation",
			ErrorTypes: []string{"SchemaError", "*errors.errorString"}, Error: `missing field "plan"`,
			Feedback: "line 1\nline 2\ttab", Output: "<b>&amp;</b>", RetryAfterMS: 1500,
			Progress: progress{Completed: 5, Total: 9}, DurationMS: -1, AtMS: math.MinInt64,
			RequestID: "0b6e0d6c-1d7f-4f0e-9f5e-2b1f2f7d9a11",
			Usage:     &usage{InputTokens: 1200, OutputTokens: 34, CostUSD: 0.000001234},
			Trace:     "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
		}},
		{"EmptyErrorTypes", record{Attempt: 2, ErrorTypes: []string{}}},
		{"NonASCIIAndInvalidUTF8", record{Attempt: 1, Error: "héllo \u2028 \xff\xfe end", Feedback: "\x00\x1f\x7f"}},
		{"UsageLargeCost", record{Attempt: 1, Usage: &usage{CostUSD: 1e21}}},
		{"UsageZeroFields", record{Attempt: 1, Usage: &usage{}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			want, err := json.Marshal(tt.r)
			require.NoError(t, err)
			got, err := tt.r.appendJSON(nil)
			require.NoError(t, err)
			require.Equal(t, string(want), string(got))
		})
	}
}

func FuzzRecordAppendJSON(f *testing.F) {
	f.Add(1, "primary", "claude", "retryable", "boom", "fix <it>", "out", "req-1", "trace", int64(10), 0.5)
	f.Add(0, "", "", "", "\xff", "\u2028", `"\`, "", "", int64(-3), math.Inf(1))
	f.Fuzz(func(t *testing.T, n int, role, agent, class, errText, feedback, output, reqID, trace string, ms int64, cost float64) {
		r := record{
			Attempt: n, Lost: n%2 == 0, Role: role, Agent: agent, Class: class, ErrorTypes: []string{role, agent},
			Error: errText, Feedback: feedback, Output: output, RetryAfterMS: ms, Progress: progress{Completed: n, Total: -n},
			DurationMS: ms, AtMS: -ms, RequestID: reqID, Trace: trace,
		}
		if n%3 == 0 {
			r.Usage = &usage{InputTokens: ms, OutputTokens: int64(n), CostUSD: cost}
		}
		want, wantErr := json.Marshal(r)
		got, err := r.appendJSON(nil)
		if wantErr != nil {
			require.Error(t, err)
			return
		}
		require.NoError(t, err)
		require.Equal(t, string(want), string(got))
	})
}

// BenchmarkEncodeRecord is the record of a failed attempt as Finish
// encodes it, against json.Marshal of the same record.
func BenchmarkEncodeRecord(b *testing.B) {
	r := record{
		Attempt: 2, Role: "primary", Agent: "claude", Class: "validation", ErrorTypes: []string{"SchemaError"},
		Error: `missing field "plan"`, Progress: progress{Completed: 5, Total: 9}, DurationMS: 42_000,
		AtMS: 1_700_000_000_000, RequestID: "0b6e0d6c-1d7f-4f0e-9f5e-2b1f2f7d9a11",
	}
	b.Run("AppendJSON", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := r.appendJSON(make([]byte, 0, 512)); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("JSONMarshal", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := json.Marshal(r); err != nil {
				b.Fatal(err)
			}
		}
	})
}
