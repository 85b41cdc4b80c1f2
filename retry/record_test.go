package retry_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/personaq/personaq/retry"
	"github.com/personaq/personaq/schemas"
)

func TestAttemptRecord(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 11, 24, 18, 0, 0, 0, time.FixedZone("CET", 3600))
	cases := map[string]struct {
		in   retry.Attempt
		want schemas.AttemptRecord
	}{
		"Minimal": {
			retry.Attempt{Number: 1, Class: retry.ClassTerminal, Error: "protected branch", At: at},
			schemas.AttemptRecord{Attempt: 1, Class: "terminal", Error: "protected branch", At: at.UTC()},
		},
		"Full": {
			retry.Attempt{Number: 3, Agent: "codex", Class: retry.ClassRetryable, Error: "503",
				ErrorTypes: []string{"StatusError", "wrapError"}, Duration: 1500 * time.Millisecond,
				Progress: retry.Progress{Completed: 2, Total: 5}, Usage: retry.Usage{InputTokens: 1200, OutputTokens: 300, CostUSD: 0.02}, At: at},
			schemas.AttemptRecord{Attempt: 3, Agent: "codex", Class: "retryable", Error: "503", ErrorType: "StatusError",
				DurationMs: 1500, Progress: &schemas.Progress{Completed: 2, Total: 5},
				Usage: &schemas.Usage{InputTokens: 1200, OutputTokens: 300, CostUSD: 0.02}, At: at.UTC()},
		},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			got := c.in.Record()
			require.Equal(t, c.want, got)
			back := retry.AttemptFromRecord(got)
			require.Equal(t, got, back.Record(), "a record reads back to itself")
			require.Equal(t, c.in.Class, back.Class)
			require.Equal(t, c.in.Progress, back.Progress)
			require.Equal(t, c.in.Usage, back.Usage)
		})
	}
}

func TestAttemptFromRecordUnknownClassCounts(t *testing.T) {
	t.Parallel()
	a := retry.AttemptFromRecord(schemas.AttemptRecord{Attempt: 2, Class: "exploded"})
	require.Equal(t, retry.ClassRetryable, a.Class)
	require.True(t, a.Class.Failed())
}
