package cli_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/personaq/personaq/consumers"
	"github.com/personaq/personaq/consumers/wire"
	"github.com/personaq/personaq/dlq"
	"github.com/personaq/personaq/integration/testenv"
	"github.com/personaq/personaq/schemas"
)

// The replay dry run shows the step deadline each replay will carry: a
// fresh budget of the original's length by default, the original (passed)
// one with --keep-deadline.
func TestQuarantineReplayDryRunShowsTheDeadline(t *testing.T) {
	t.Parallel()
	n := testenv.StartNATS(t)
	js := n.JetStream(t)
	topo := wire.Topology{}.WithDefaults()
	require.NoError(t, consumers.Provision(context.Background(), js, topo, nil))
	req := schemas.NewRequest("story-43", "review", "terminal")
	req.CreatedAt = time.Now().Add(-time.Hour).UTC()
	payload, err := schemas.Encode(req)
	require.NoError(t, err)
	deadline := req.CreatedAt.Add(7*time.Minute + 30*time.Second)
	rec := &schemas.QuarantineRecord{
		SchemaVersion: schemas.Version, ID: dlq.RecordID(topo.RequestsStream, 13), Reason: schemas.ReasonTerminal,
		Detail: "terminal", OriginalSubject: topo.RequestSubject("terminal"), Payload: payload, Stream: topo.RequestsStream,
		Sequence: 13, RequestID: req.RequestID, TaskID: req.TaskID, Step: req.Step, Persona: "terminal", QuarantinedAt: time.Now().UTC(),
		Headers: map[string][]string{schemas.HeaderDeadline: {deadline.Format(time.RFC3339Nano)}},
	}
	seq, _, err := dlq.NewWriter(js, topo.QuarantineSubject).Put(context.Background(), rec)
	require.NoError(t, err)

	code, out, errOut := qrun(t, n.URL(), "quarantine", "replay", "--dry-run", fmt.Sprint(seq))
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "(fresh step budget of 7m30s (the original's), from the replay)")
	code, out, errOut = qrun(t, n.URL(), "quarantine", "replay", "--dry-run", "-o", "json", fmt.Sprint(seq))
	require.Equal(t, 0, code, errOut)
	var rep dlq.ReplayReport
	require.NoError(t, json.Unmarshal([]byte(out), &rep))
	require.WithinDuration(t, time.Now().Add(7*time.Minute+30*time.Second), rep.Items[0].Deadline, 5*time.Second)

	code, out, errOut = qrun(t, n.URL(), "quarantine", "replay", "--dry-run", "--keep-deadline", fmt.Sprint(seq))
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "; step deadline "+deadline.UTC().Format(time.RFC3339)+
		" (original step deadline kept — it has passed: the replay will end deadline_exceeded without running)")
}
