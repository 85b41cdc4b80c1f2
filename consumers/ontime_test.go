package consumers_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/personaq/personaq/consumers"
	"github.com/personaq/personaq/consumers/transport"
	"github.com/personaq/personaq/handlers"
	"github.com/personaq/personaq/schemas"
)

// With a ledger, a retry's message comes back ahead of its due time and
// its attempt starts when due, not before: the redelivery, its lookups and
// Begin are out of the retry's way. Without one, the message comes back
// when due. The lead is raised to 250 ms here so that "early" stands out
// from the machine's own delays.
func TestRetryComesBackEarlyAndStartsOnTime(t *testing.T) {
	t.Parallel()
	const delay = time.Second
	for _, tc := range []struct {
		name   string
		ledger bool
	}{{"Ledger", true}, {"NoLedger", false}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, tc.ledger)
			out := h.watchOutcomes()
			var mu sync.Mutex
			var failedAt, received, started time.Time
			h.startArmed(nil, func(rt *consumers.Runtime) { rt.SetRetryLead(300 * time.Millisecond) },
				persona("ontime", handlers.Func(func(ctx context.Context, req *handlers.Request) (handlers.Result, error) {
					mu.Lock()
					defer mu.Unlock()
					d, _ := transport.DeliveryFrom(ctx)
					if d.Delivered == 1 {
						failedAt = time.Now()
						return handlers.Result{}, handlers.After(delay, errors.New("provider busy"))
					}
					received, started = d.Received, time.Now()
					return handlers.Result{}, nil
				}), fastPolicy(3)))
			req := h.publish("ontime", "t-ontime")
			require.Equal(t, schemas.OutcomeSucceeded, out.wait(t, req.RequestID, 20*time.Second).Outcome)
			mu.Lock()
			defer mu.Unlock()
			due := failedAt.Add(delay)
			// The attempt's end is a little after the handler's return:
			// never before due, whatever the ledger's milliseconds.
			require.False(t, started.Before(due), "started %s before due", due.Sub(started))
			if tc.ledger {
				require.True(t, received.Before(due.Add(-100*time.Millisecond)), "came back %s before due, want about 250ms", due.Sub(received))
			} else {
				require.False(t, received.Before(due), "came back %s before due without a ledger", due.Sub(received))
			}
		})
	}
}
