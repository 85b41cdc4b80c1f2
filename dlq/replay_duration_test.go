package dlq_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/personaq/personaq/consumers"
	"github.com/personaq/personaq/dlq"
	"github.com/personaq/personaq/schemas"
)

// A replay keeps the original's payload, created_at included; its terminal
// record reports the replay's own run, not the time since the original was
// created.
func TestReplayReportsItsOwnDuration(t *testing.T) {
	t.Parallel()
	b := newBundle(t)
	out := b.watchOutcomes()
	b.runtime()
	req := schemas.NewRequest("task-old", "main", "replayable")
	req.CreatedAt = time.Now().Add(-time.Hour).UTC()
	_, err := consumers.PublishRequest(ctx(t), b.js, b.topo, req)
	require.NoError(t, err)
	ev := out.wait(t, req.RequestID)
	require.GreaterOrEqual(t, ev.DurationMs, time.Hour.Milliseconds(), "the original's run counts from its created_at")

	_, err = b.insp.Replay(ctx(t), dlq.Selection{Seqs: []uint64{ev.QuarantineSeq}}, dlq.ReplayOptions{})
	require.NoError(t, err)
	ev2 := out.wait(t, req.RequestID+"-r1")
	require.Equal(t, schemas.OutcomeSucceeded, ev2.Outcome)
	require.Less(t, ev2.DurationMs, (10 * time.Second).Milliseconds(), "the replay's own run")
}
