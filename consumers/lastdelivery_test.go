package consumers_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/personaq/personaq/consumers"
	"github.com/personaq/personaq/handlers"
	"github.com/personaq/personaq/schemas"
)

// A request whose worker never settles it (here a replica that stops, as
// under SIGSTOP, for longer than AckWait on every run: no heartbeats, so
// each delivery lapses and the run's late settle is refused) is redelivered until its delivery count reaches the
// consumer's MaxDeliver. That last delivery is not run: the runtime
// quarantines it as max_deliveries and terms it, so the server never gives
// up on a message nothing recorded. It ends with exactly one quarantine
// record, written by the runtime (not the advisory listener), one terminal
// record naming it, and the trimmer then removes it from the requests
// stream with its record stored. With and without the attempt ledger (the
// ledger adds a lease per attempt, and the record its attempt history).
func TestLastDeliveryIsQuarantinedByTheRuntime(t *testing.T) {
	t.Parallel()
	const maxDeliver = 3
	for _, tc := range []struct {
		name       string
		withLedger bool
	}{
		{"WithoutLedger", false},
		{"WithLedger", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, tc.withLedger)
			out := h.watchOutcomes()
			var runs atomic.Int32
			var rt atomic.Pointer[consumers.Runtime]
			p := persona("loop", handlers.Func(func(context.Context, *handlers.Request) (handlers.Result, error) {
				runs.Add(1)
				// Hung past AckWait with no heartbeat, as a process stopped
				// mid-run: the server redelivers, and this run's settle is
				// refused when it wakes.
				rt.Load().Freeze(true)
				time.Sleep(fenceAckWait * 3 / 2)
				rt.Load().Freeze(false)
				return handlers.Result{}, errors.New("woke too late")
			}), fastPolicy(10))
			p.AckWait, p.MaxDeliver = fenceAckWait, maxDeliver
			h.startArmed(nil, func(r *consumers.Runtime) { rt.Store(r) }, p)
			req := h.publish("loop", "t-loop")

			ev := out.wait(t, req.RequestID, 30*time.Second)
			require.Equal(t, schemas.OutcomeQuarantined, ev.Outcome)
			require.Equal(t, schemas.ReasonMaxDeliveries, ev.Reason)
			require.NotZero(t, ev.QuarantineSeq)
			require.Less(t, int(runs.Load()), maxDeliver, "the last delivery did not run the handler")

			recs := h.quarantinedFor(req.RequestID)
			require.Len(t, recs, 1, "exactly one quarantine record")
			rec := h.quarantined(ev.QuarantineSeq)
			require.Equal(t, req.RequestID, rec.RequestID, "the terminal record names the quarantine record")
			require.Equal(t, schemas.ReasonMaxDeliveries, rec.Reason)
			require.Equal(t, uint64(maxDeliver), rec.Deliveries, "written on the last delivery")
			require.Contains(t, rec.Detail, "on its last delivery", "written by the runtime, not the advisory listener")
			stored, err := schemas.DecodeRequest(rec.Payload)
			require.NoError(t, err, "payload intact, for replay")
			require.Equal(t, req.RequestID, stored.RequestID)

			s, err := h.js.Stream(context.Background(), h.topo.RequestsStream)
			require.NoError(t, err)
			require.Eventually(t, func() bool { // termed: the ack floor passes it and the trimmer purges it
				info, err := s.Info(context.Background())
				require.NoError(t, err)
				return info.State.Msgs == 0
			}, 15*time.Second, 50*time.Millisecond, "the trimmer removes the quarantined request")
			require.Len(t, h.quarantinedFor(req.RequestID), 1, "still one record: the advisory listener added none")
			require.Equal(t, 1, out.count(), "one terminal record")
		})
	}
}
