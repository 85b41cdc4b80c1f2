package consumers_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/personaq/personaq/consumers/wire"
	"github.com/personaq/personaq/handlers"
)

// ForTask finds a task's terminal records in NATS alone (no ledger).
func TestOutcomesForTask(t *testing.T) {
	t.Parallel()
	h := newHarness(t, false)
	out := h.watchOutcomes()
	h.start(persona("echo", handlers.Func(func(context.Context, *handlers.Request) (handlers.Result, error) {
		return handlers.Result{Output: []byte(`{"ok":true}`)}, nil
	}), fastPolicy(1)))
	a, b := h.publish("echo", "story-1"), h.publish("echo", "story-1")
	other := h.publish("echo", "story-2")
	for _, id := range []string{a.RequestID, b.RequestID, other.RequestID} {
		out.wait(t, id, 10*time.Second)
	}
	got, err := wire.NewOutcomes(h.js, h.topo).ForTask(context.Background(), "story-1")
	require.NoError(t, err)
	require.Equal(t, 3, got.Scanned)
	require.False(t, got.Truncated)
	require.Len(t, got.Records, 2)
	require.ElementsMatch(t, []string{a.RequestID, b.RequestID}, []string{got.Records[0].RequestID, got.Records[1].RequestID})

	none, err := wire.NewOutcomes(h.js, h.topo).ForTask(context.Background(), "story-404")
	require.NoError(t, err)
	require.Empty(t, none.Records)
}
