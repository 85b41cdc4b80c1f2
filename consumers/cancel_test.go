package consumers_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/personaq/personaq/consumers/wire"
	"github.com/personaq/personaq/schemas"
)

// A cancel racing a success ends the request as exactly one of them: one
// record stored, and both writers told which one stands.
func TestCancelRacingSuccessEndsOnce(t *testing.T) {
	t.Parallel()
	h := newHarness(t, false)
	ctx := context.Background()
	outs := wire.NewOutcomes(h.js, h.topo)
	won := map[schemas.Outcome]int{}
	for i := range 40 {
		id := fmt.Sprintf("race-%d", i)
		success := &schemas.OutcomeEvent{SchemaVersion: schemas.Version, RequestID: id, TaskID: "t", Step: "main",
			Persona: "echo", Outcome: schemas.OutcomeSucceeded, Attempts: 1, At: time.Now().UTC()}
		var wg sync.WaitGroup
		var succStood *schemas.OutcomeEvent
		var succWon bool
		var cancelStood *schemas.OutcomeEvent
		var cancelErr, succErr error
		wg.Add(2)
		go func() {
			defer wg.Done()
			succStood, succWon, succErr = outs.Create(ctx, success, nil)
		}()
		go func() {
			defer wg.Done()
			cancelStood, cancelErr = wire.Cancel(ctx, h.js, h.topo, wire.Cancellation{
				RequestID: id, Persona: "echo", TaskID: "t", Step: "main", Reason: "workflow cancelled", By: "test"})
		}()
		wg.Wait()
		require.NoError(t, succErr)
		require.Equal(t, succStood.Outcome, cancelStood.Outcome, "both writers see the record that stands")
		require.NotEqual(t, succWon, cancelErr == nil, "exactly one writer wins")
		if succWon {
			require.ErrorIs(t, cancelErr, wire.ErrAlreadyEnded)
		}
		stored, err := outs.Lookup(ctx, id)
		require.NoError(t, err)
		require.Equal(t, succStood.Outcome, stored.Outcome)
		won[stored.Outcome]++
	}
	require.Equal(t, 40, won[schemas.OutcomeSucceeded]+won[schemas.OutcomeCancelled])
	info, err := h.js.Stream(ctx, h.topo.OutcomesStream)
	require.NoError(t, err)
	st, err := info.Info(ctx)
	require.NoError(t, err)
	require.EqualValues(t, 40, st.State.Msgs, "one record per request")
	t.Logf("winners: %v", won)
}

// The cancelled record keeps the reason text and who asked.
func TestCancelRecordKeepsReasonAndWho(t *testing.T) {
	t.Parallel()
	h := newHarness(t, false)
	rec, err := wire.Cancel(context.Background(), h.js, h.topo, wire.Cancellation{
		RequestID: "r-1", Persona: "echo", TaskID: "story-1", Step: "plan", Reason: "superseded by r-2", By: "token ci"})
	require.NoError(t, err)
	got, err := wire.NewOutcomes(h.js, h.topo).Lookup(context.Background(), "r-1")
	require.NoError(t, err)
	require.Equal(t, rec.At, got.At)
	require.Equal(t, schemas.OutcomeCancelled, got.Outcome)
	require.Equal(t, schemas.ReasonCancelled, got.Reason)
	require.Equal(t, "superseded by r-2", got.Detail)
	require.Equal(t, "token ci", got.CancelledBy)
	require.Equal(t, "story-1", got.TaskID)
	_, err = wire.Cancel(context.Background(), h.js, h.topo, wire.Cancellation{RequestID: "r-1", Persona: "echo"})
	require.ErrorIs(t, err, wire.ErrAlreadyEnded)
}
