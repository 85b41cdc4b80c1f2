package consumers_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/personaq/personaq/handlers"
	"github.com/personaq/personaq/schemas"
)

// A request's worker slot is freed when its handler returns, while its
// terminal record is stored and its ack sent; the handlers of a persona
// still never run more than Concurrency at once, and every request ends
// once, with one handler call.
func TestHandlersNeverExceedConcurrencyWhileRecordsAreStored(t *testing.T) {
	t.Parallel()
	h := newHarness(t, true)
	const n, slots = 120, 3
	var running, peak, calls atomic.Int64
	handler := handlers.Func(func(context.Context, *handlers.Request) (handlers.Result, error) {
		calls.Add(1)
		now := running.Add(1)
		for {
			p := peak.Load()
			if now <= p || peak.CompareAndSwap(p, now) {
				break
			}
		}
		time.Sleep(time.Millisecond)
		running.Add(-1)
		return handlers.Result{}, nil
	})
	p := persona("bounded", handler, fastPolicy(2))
	p.Concurrency = slots
	out := h.watchOutcomes()
	ids := make([]string, n)
	for i := range n {
		ids[i] = h.publish("bounded", fmt.Sprintf("task-%d", i)).RequestID
	}
	h.start(p)
	for _, id := range ids {
		require.Equal(t, schemas.OutcomeSucceeded, out.wait(t, id, 60*time.Second).Outcome, id)
	}
	require.Eventually(t, func() bool { return h.requestsLeft() == 0 }, 30*time.Second, 20*time.Millisecond)
	require.LessOrEqual(t, peak.Load(), int64(slots), "handlers running at once")
	require.EqualValues(t, n, calls.Load(), "one handler call per request")
	require.Equal(t, n, out.count(), "one outcome per request")
}
