package api

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/personaq/personaq/schemas"
)

// TestLastAttemptStored: an event stream ends only once the events of the
// record's last attempt are stored (published beside the record, they may
// be stored just after it).
func TestLastAttemptStored(t *testing.T) {
	t.Parallel()
	event := func(kind schemas.AttemptKind, attempt int) []byte {
		b, err := json.Marshal(map[string]any{"schema_version": schemas.Version, "kind": kind, "attempt": attempt,
			"request_id": "r", "persona": "p", "task_id": "t", "step": "s", "at": "2026-11-27T00:00:00Z"})
		require.NoError(t, err)
		return b
	}
	failed2 := &schemas.OutcomeEvent{Outcome: schemas.OutcomeQuarantined, Attempts: 2}
	succeeded2 := &schemas.OutcomeEvent{Outcome: schemas.OutcomeSucceeded, Attempts: 2}
	for name, tc := range map[string]struct {
		rec  *schemas.OutcomeEvent
		last []byte
		want bool
	}{
		"no event yet":                             {failed2, nil, false},
		"an earlier attempt's failure":             {failed2, event(schemas.AttemptFailed, 1), false},
		"the last attempt started, not yet failed": {failed2, event(schemas.AttemptStarted, 2), false},
		"the last attempt's failure":               {failed2, event(schemas.AttemptFailed, 2), true},
		"the last attempt cancelled":               {failed2, event(schemas.AttemptCancelled, 2), true},
		"a success's last start":                   {succeeded2, event(schemas.AttemptStarted, 2), true},
		"a success's earlier failure":              {succeeded2, event(schemas.AttemptFailed, 1), false},
		"past the record's count":                  {failed2, event(schemas.AttemptStarted, 3), true},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tc.want, lastAttemptStored(tc.rec, tc.last))
		})
	}
}
