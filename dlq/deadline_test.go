package dlq_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/personaq/personaq/consumers"
	"github.com/personaq/personaq/dlq"
	"github.com/personaq/personaq/schemas"
)

// A request submitted with a step deadline, quarantined, and replayed after
// that deadline passed (the usual case: someone fixed the persona) runs:
// its replay carries a fresh step budget of the original's length, which
// the dry run shows. With KeepDeadline it carries the original's, says it
// passed, and ends deadline_exceeded unrun.
func TestReplayStartsAFreshStepBudget(t *testing.T) {
	t.Parallel()
	b := newBundle(t)
	out := b.watchOutcomes()
	b.runtime()
	const budget = 2 * time.Second
	publish := func(task string) *schemas.OutcomeEvent {
		req := schemas.NewRequest(task, "main", "replayable")
		_, err := consumers.PublishRequest(ctx(t), b.js, b.topo, req, consumers.WithDeadline(req.CreatedAt.Add(budget)))
		require.NoError(t, err)
		ev := out.wait(t, req.RequestID)
		require.Equal(t, schemas.ReasonTerminal, ev.Reason)
		return ev
	}
	fresh, kept := publish("t-fresh"), publish("t-kept")
	time.Sleep(budget) // both deadlines pass before anyone replays

	sel := dlq.Selection{Seqs: []uint64{fresh.QuarantineSeq}}
	dry, err := b.insp.Replay(ctx(t), sel, dlq.ReplayOptions{DryRun: true})
	require.NoError(t, err)
	require.WithinDuration(t, time.Now().Add(budget), dry.Items[0].Deadline, time.Second, "the dry run shows the fresh deadline")
	require.Contains(t, dry.Items[0].DeadlineNote, "fresh step budget of 2s")

	rep, err := b.insp.Replay(ctx(t), sel, dlq.ReplayOptions{})
	require.NoError(t, err)
	require.Equal(t, 1, rep.Replayed)
	ev := out.wait(t, fresh.RequestID+"-r1")
	require.Equal(t, schemas.OutcomeSucceeded, ev.Outcome, "the replay ran: %s", ev.Detail)

	rep, err = b.insp.Replay(ctx(t), dlq.Selection{Seqs: []uint64{kept.QuarantineSeq}}, dlq.ReplayOptions{KeepDeadline: true})
	require.NoError(t, err)
	require.Contains(t, rep.Items[0].DeadlineNote, "it has passed")
	ev = out.wait(t, kept.RequestID+"-r1")
	require.Equal(t, schemas.OutcomeDeadlineExceeded, ev.Outcome, "the original deadline, kept, had passed")
}
