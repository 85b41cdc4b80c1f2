package cli

import (
	"bytes"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/personaq/personaq/schemas"
)

// A reason that only repeats the outcome is not printed twice.
func TestResultLabelsDoNotRepeatTheOutcome(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		outcome schemas.Outcome
		reason  schemas.Reason
		want    string
	}{
		{schemas.OutcomeDeferred, schemas.ReasonDeferred, "request r-1  deferred\n"},
		{schemas.OutcomeDeadlineExceeded, schemas.ReasonDeadlineExceeded, "request r-1  deadline_exceeded\n"},
		{schemas.OutcomeQuarantined, schemas.ReasonTerminal, "request r-1  quarantined (terminal)\n"},
		{schemas.OutcomeSucceeded, "", "request r-1  succeeded\n"},
	} {
		var buf bytes.Buffer
		require.NoError(t, writeRecordText(&buf, &schemas.OutcomeEvent{RequestID: "r-1", Outcome: tc.outcome, Reason: tc.reason, At: time.Now()}, nil))
		first, _, _ := bytes.Cut(buf.Bytes(), []byte("\n  "))
		require.Equal(t, tc.want, string(first)+"\n")
	}
}
