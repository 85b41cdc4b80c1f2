package consumers_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/personaq/personaq/consumers/ledger"
	"github.com/personaq/personaq/handlers"
	"github.com/personaq/personaq/integration/testenv"
	"github.com/personaq/personaq/schemas"
)

// Redis loses the ledger between a request's attempts: its terminal record
// still counts every attempt that ran (4, the broker's delivery count as
// the floor, not the 2 the ledger kept) and says the history is partial.
func TestAttemptsAfterRedisWipeTakeTheDeliveryCount(t *testing.T) {
	t.Parallel()
	h := newHarness(t, false)
	rc := testenv.StartRedis(t).Client(t)
	l, err := ledger.New(ledger.Config{Client: rc})
	require.NoError(t, err)
	_, err = l.Epoch(context.Background())
	require.NoError(t, err)
	h.ledger = l
	out := h.watchOutcomes()
	var runs atomic.Int32
	h.start(persona("wiped", handlers.Func(func(context.Context, *handlers.Request) (handlers.Result, error) {
		if runs.Add(1) == 2 {
			time.Sleep(10 * time.Millisecond) // the epoch's clock moves past the message's publish time
			require.NoError(t, rc.FlushAll(context.Background()).Err())
		}
		return handlers.Result{}, errors.New("upstream flaky")
	}), fastPolicy(4)))
	req := h.publish("wiped", "t-wiped")
	ev := out.wait(t, req.RequestID, 20*time.Second)
	require.Equal(t, schemas.ReasonExhausted, ev.Reason)
	require.EqualValues(t, 4, runs.Load())
	require.Equal(t, 4, ev.Attempts, "every attempt that ran is counted")
	require.Contains(t, ev.Detail, "lower bound")
	rec := h.quarantined(ev.QuarantineSeq)
	require.Equal(t, 4, rec.Attempts)
	require.Contains(t, rec.Detail, "lower bound")
}
