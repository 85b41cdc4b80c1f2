package schemas_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/personaq/personaq/schemas"
)

// TestMarshalOutcome holds MarshalOutcome to json.Marshal, byte for byte:
// outcome events written by either must be the same record.
func TestMarshalOutcome(t *testing.T) {
	t.Parallel()
	full := validOutcome()
	full.Detail, full.Blocked = "all 4 attempts used <see log>", true
	full.Output = json.RawMessage(`{"plan":["a","b"],"n":1.5e3}`)
	full.SubmittedAt = at.Add(-time.Minute).In(time.FixedZone("X", -(5*3600 + 30*60)))
	full.Usage = &schemas.Usage{InputTokens: 1200, OutputTokens: 34, CostUSD: 0.000000123}
	cancelled := validOutcome()
	cancelled.Outcome, cancelled.Reason, cancelled.QuarantineSeq = schemas.OutcomeCancelled, schemas.ReasonCancelled, 0
	cancelled.Detail, cancelled.CancelledBy = "workflow cancelled upstream", "token \"ci\""
	cancelled.Usage = &schemas.Usage{InputTokens: 3, OutputTokens: 4}
	full.RequestDigest = "sha256:0a1b"
	ref := validOutcome()
	ref.Output, ref.OutputRef = nil, &schemas.ObjectRef{Bucket: "OUT", Name: "k.ab12", Size: 1 << 20, Digest: "SHA-256=abc_-"}
	tests := []struct {
		name string
		ev   *schemas.OutcomeEvent
	}{
		{"Zero", &schemas.OutcomeEvent{}},
		{"Valid", validOutcome()},
		{"Full", full},
		{"OutputRef", ref},
		{"Cancelled", cancelled},
		{"OutputNeedsCompacting", &schemas.OutcomeEvent{At: at, Output: json.RawMessage("{ \"a\" : \"<b>\\u2028\" }\n")}},
		{"OutputString", &schemas.OutcomeEvent{At: at, Output: json.RawMessage(`"plain text"`)}},
		{"Escapes", &schemas.OutcomeEvent{RequestID: "a\"b\\c", LastError: "tab\there\nnl \x01 \x7f é \u2028\u2029 \xff&<>"}},
		{"Nanos", &schemas.OutcomeEvent{At: time.Date(2026, 1, 2, 3, 4, 5, 120, time.UTC)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			want, err := json.Marshal(tt.ev)
			require.NoError(t, err)
			got, err := schemas.MarshalOutcome(tt.ev)
			require.NoError(t, err)
			require.Equal(t, string(want), string(got))
		})
	}
	t.Run("InvalidOutputFails", func(t *testing.T) {
		t.Parallel()
		_, err := schemas.MarshalOutcome(&schemas.OutcomeEvent{Output: json.RawMessage(`{"a":`)})
		require.Error(t, err)
	})
	t.Run("YearOutOfRangeFails", func(t *testing.T) {
		t.Parallel()
		_, err := schemas.MarshalOutcome(&schemas.OutcomeEvent{At: time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)})
		require.Error(t, err)
	})
}

func FuzzMarshalOutcome(f *testing.F) {
	f.Add("req-1", "boom", "detail <x>", []byte(`{"a":1}`), int64(1_700_000_000_123_456_789), 3600, 0.5, uint64(7), true)
	f.Add("\xff\u2028", "", "", []byte(" [1, 2]\n"), int64(-9_000_000_000_000_000_000), -86399, 1e21, uint64(0), false)
	f.Fuzz(func(t *testing.T, id, lastErr, detail string, output []byte, unixNano int64, offset int, cost float64, seq uint64, extras bool) {
		ev := &schemas.OutcomeEvent{
			SchemaVersion: 1, RequestID: id, TaskID: lastErr, Step: detail, Persona: id,
			Outcome: schemas.Outcome(detail), Reason: schemas.Reason(lastErr), Attempts: offset, Agent: id,
			LastError: lastErr, DurationMs: unixNano, CorrelationID: detail, QuarantineSeq: seq,
			At: time.Unix(0, unixNano).In(time.FixedZone("", offset%200_000)), Detail: detail,
			Blocked: extras, Output: output,
		}
		if extras {
			ev.Progress = &schemas.Progress{Completed: offset, Total: -offset}
			ev.OutputRef = &schemas.ObjectRef{Bucket: id, Name: detail, Size: unixNano, Digest: lastErr}
			ev.SubmittedAt = time.Unix(0, -unixNano).UTC()
			ev.CancelledBy = lastErr
			ev.Usage = &schemas.Usage{InputTokens: unixNano, OutputTokens: int64(offset), CostUSD: cost}
		}
		want, wantErr := json.Marshal(ev)
		got, err := schemas.MarshalOutcome(ev)
		if wantErr != nil {
			require.Error(t, err)
			return
		}
		require.NoError(t, err)
		require.Equal(t, string(want), string(got))
	})
}

// BenchmarkMarshalOutcome is the succeeded event the runtime writes per
// request, by MarshalOutcome and by json.Marshal.
func BenchmarkMarshalOutcome(b *testing.B) {
	ev := &schemas.OutcomeEvent{
		SchemaVersion: schemas.Version, RequestID: "0b6e0d6c-1d7f-4f0e-9f5e-2b1f2f7d9a11", TaskID: "TASK-42",
		Step: "plan", Persona: "planner", Outcome: schemas.OutcomeSucceeded, Attempts: 1, Agent: "claude",
		DurationMs: 1234, CorrelationID: "corr-9", At: at, SubmittedAt: at.Add(-time.Second),
		Output: json.RawMessage(`{"plan":["a","b"]}`),
	}
	b.Run("MarshalOutcome", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := schemas.MarshalOutcome(ev); err != nil {
				b.Fatal(err)
			}
		}
	})
	// Terminal is the record as the runtime writes it: with the digest.
	b.Run("Terminal", func(b *testing.B) {
		ev := terminalOutcome()
		b.ReportAllocs()
		for b.Loop() {
			if _, err := schemas.MarshalOutcome(ev); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("JSONMarshal", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := json.Marshal(ev); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// TestMarshalAttempt holds MarshalAttempt to json.Marshal, byte for byte.
func TestMarshalAttempt(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		ev   *schemas.AttemptEvent
	}{
		{"Zero", &schemas.AttemptEvent{}},
		{"Started", &schemas.AttemptEvent{
			SchemaVersion: schemas.Version, RequestID: "req-1", TaskID: "TASK-42", Step: "plan", Persona: "planner",
			Kind: "started", Attempt: 1, MaxAttempts: 3, Agent: "claude", CorrelationID: "corr-9", At: at,
		}},
		{"Failed", &schemas.AttemptEvent{
			SchemaVersion: schemas.Version, RequestID: "req-1", TaskID: "TASK-42", Step: "plan", Persona: "planner",
			Kind: "failed", Attempt: 2, MaxAttempts: 3, Agent: "codex", Class: "retryable", Error: `429 "slow down" <retry>`,
			Progress: &schemas.Progress{Completed: 1, Total: 4}, DurationMs: 812, NextAttempt: 3, NextAgent: "claude",
			NextDelayMs: 2000, At: at.In(time.FixedZone("", 3600)), Usage: &schemas.Usage{InputTokens: 10, CostUSD: 1e-7},
		}},
		{"Queued", &schemas.AttemptEvent{
			SchemaVersion: schemas.Version, RequestID: "req-1", TaskID: "TASK-42", Step: "plan", Persona: "planner",
			Kind: schemas.AttemptQueued, At: at, Deadline: at.Add(time.Minute), CreatedAt: at.Add(-time.Second),
			RequestDigest: "sha256:00ff",
		}},
		{"Waiting", &schemas.AttemptEvent{
			SchemaVersion: schemas.Version, RequestID: "req-1", TaskID: "TASK-42", Step: "plan", Persona: "planner",
			Kind: schemas.AttemptWaiting, MaxAttempts: 3, WaitingFor: schemas.WaitingForLedger, Error: "redis: connection refused", At: at,
		}},
		{"Escapes", &schemas.AttemptEvent{Error: "\xff\u2028\x00\t&", DurationMs: -5, At: time.Date(1, 1, 1, 0, 0, 0, 1, time.UTC)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			want, err := json.Marshal(tt.ev)
			require.NoError(t, err)
			got, err := schemas.MarshalAttempt(tt.ev)
			require.NoError(t, err)
			require.Equal(t, string(want), string(got))
		})
	}
}

func FuzzMarshalAttempt(f *testing.F) {
	f.Add("req-1", "failed", "boom <x>", int64(1_700_000_000_123_456_789), 3600, 2, int64(1500), 0.25, true)
	f.Add("\xff", "", "\u2029", int64(-1), -86399, 0, int64(0), 1e22, false)
	f.Fuzz(func(t *testing.T, id, kind, errText string, unixNano int64, offset, n int, ms int64, cost float64, extras bool) {
		ev := &schemas.AttemptEvent{
			SchemaVersion: n, RequestID: id, TaskID: errText, Step: kind, Persona: id, Kind: schemas.AttemptKind(kind),
			Attempt: n, MaxAttempts: -n, Agent: kind, Class: errText, Error: errText, DurationMs: ms,
			NextAttempt: n + 1, NextAgent: id, NextDelayMs: -ms, CorrelationID: kind,
			At: time.Unix(0, unixNano).In(time.FixedZone("", offset%200_000)),
		}
		if extras {
			ev.Progress = &schemas.Progress{Completed: n, Total: offset}
			ev.Usage = &schemas.Usage{InputTokens: ms, OutputTokens: int64(n), CostUSD: cost}
		}
		want, wantErr := json.Marshal(ev)
		got, err := schemas.MarshalAttempt(ev)
		if wantErr != nil {
			require.Error(t, err)
			return
		}
		require.NoError(t, err)
		require.Equal(t, string(want), string(got))
	})
}

// BenchmarkMarshalAttempt is the "started" event the runtime publishes per
// attempt, by MarshalAttempt and by json.Marshal.
func BenchmarkMarshalAttempt(b *testing.B) {
	ev := &schemas.AttemptEvent{
		SchemaVersion: schemas.Version, RequestID: "0b6e0d6c-1d7f-4f0e-9f5e-2b1f2f7d9a11", TaskID: "TASK-42",
		Step: "plan", Persona: "planner", Kind: "started", Attempt: 1, MaxAttempts: 3, Agent: "claude",
		CorrelationID: "corr-9", At: at,
	}
	b.Run("MarshalAttempt", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := schemas.MarshalAttempt(ev); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("JSONMarshal", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := json.Marshal(ev); err != nil {
				b.Fatal(err)
			}
		}
	})
}
