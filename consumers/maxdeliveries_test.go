package consumers_test

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/personaq/personaq/consumers"
	"github.com/personaq/personaq/consumers/wire"
	"github.com/personaq/personaq/handlers"
	"github.com/personaq/personaq/schemas"
)

// A request the server gives up on (MaxDeliver deliveries, none settled:
// here a worker that takes it and never answers) is captured by a
// replica's max-deliveries listener, and ends like every other request:
// one quarantine record and one terminal record a waiting caller finds,
// naming that record. The record's text does not claim to know why.
func TestMaxDeliveriesCaptureWritesTheTerminalRecord(t *testing.T) {
	t.Parallel()
	h := newHarness(t, true)
	out := h.watchOutcomes()
	spec := consumers.ConsumerSpec{Persona: "hung", AckWait: 200 * time.Millisecond, MaxAckPending: 10, MaxDeliver: 2}
	require.NoError(t, consumers.Provision(setupCtx(t), h.js, h.topo, []consumers.ConsumerSpec{spec}))
	h.startMod(func(c *consumers.Config) { c.UnknownPersonaGrace = -1 },
		persona("other", handlers.Func(func(context.Context, *handlers.Request) (handlers.Result, error) {
			return handlers.Result{}, nil
		}), fastPolicy(1)))
	req := h.publish("hung", "t-hung")

	hung, err := h.js.Consumer(context.Background(), h.topo.RequestsStream, wire.Durable("hung"))
	require.NoError(t, err)
	for range spec.MaxDeliver { // taken, never settled
		_, err := hung.Next(jetstream.FetchMaxWait(20 * time.Second)) // returns at the delivery: the bound is for a loaded machine
		require.NoError(t, err)
	}
	require.Eventually(t, func() bool { // a worker still pulling makes the server give up
		batch, err := hung.Fetch(1, jetstream.FetchMaxWait(100*time.Millisecond))
		require.NoError(t, err)
		for range batch.Messages() {
			t.Fatal("a message past MaxDeliver was delivered")
		}
		return h.requestsLeft() == 0
	}, 15*time.Second, 10*time.Millisecond, "captured and removed from the work stream")

	ev := out.wait(t, req.RequestID, 10*time.Second)
	require.Equal(t, schemas.OutcomeQuarantined, ev.Outcome)
	require.Equal(t, schemas.ReasonMaxDeliveries, ev.Reason)
	require.Equal(t, req.TaskID, ev.TaskID)
	require.Equal(t, "hung", ev.Persona)
	require.NotZero(t, ev.QuarantineSeq)
	rec := h.quarantined(ev.QuarantineSeq)
	require.Equal(t, req.RequestID, rec.RequestID, "the terminal record names the quarantine record")
	require.Equal(t, schemas.ReasonMaxDeliveries, rec.Reason)
	require.Contains(t, ev.Detail, "never settled")
	require.NotContains(t, ev.Detail, "most likely crashed")

	looked, err := wire.NewOutcomes(h.js, h.topo).Lookup(context.Background(), req.RequestID)
	require.NoError(t, err, "result finds it")
	require.Equal(t, ev.QuarantineSeq, looked.QuarantineSeq)
	require.Equal(t, 1, out.count(), "one terminal record")
}
