package transport_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/stretchr/testify/require"

	"github.com/personaq/personaq/consumers/transport"
)

// noMessage fails if ch hands out a message within wait.
func noMessage(t *testing.T, ch <-chan *message.Message, wait time.Duration, why string) {
	t.Helper()
	select {
	case m := <-ch:
		t.Fatalf("%s: got %s", why, m.UUID)
	case <-time.After(wait):
	}
}

// WorkDone gives the worker slot back before the settle: with one slot,
// the next message comes while the first is still unsettled, up to
// Finishing deliveries past their work; then WorkDone keeps the slot
// (false) and nothing more is pulled until a settle frees one. Every
// delivery stays held and settles normally, and the slots add up after:
// one settled message frees exactly one slot.
func TestWorkDoneFreesTheSlotUpToFinishing(t *testing.T) {
	t.Parallel()
	h, sub := slotSubscriber(t, "finish", 1, typedOnly, func(c *transport.Config) { c.Finishing = 2 })
	ch, err := sub.Subscribe(context.Background(), "finish")
	require.NoError(t, err)
	pub := transport.NewPublisher(h.js)
	for i := range 6 {
		require.NoError(t, pub.Publish(h.topo.RequestSubject("finish"), message.NewMessage("m"+strconv.Itoa(i), []byte(`{}`))))
	}

	first := delivery(t, receive(t, ch))
	noMessage(t, ch, 300*time.Millisecond, "one slot, held by the first message")
	require.True(t, first.WorkDone())
	require.False(t, first.WorkDone(), "once per delivery")
	second := delivery(t, receive(t, ch))
	require.True(t, second.WorkDone())
	third := delivery(t, receive(t, ch))
	require.False(t, third.WorkDone(), "two finish already: the third keeps its slot")
	noMessage(t, ch, 300*time.Millisecond, "the one slot is held by the third")
	require.Equal(t, 3, sub.InFlight(), "finishing deliveries stay held until settled")

	require.NoError(t, first.Ack())
	noMessage(t, ch, 300*time.Millisecond, "a finishing delivery's settle frees no slot: it had given its slot back")
	require.NoError(t, third.Ack())
	fourth := delivery(t, receive(t, ch))
	require.True(t, fourth.WorkDone(), "the first's settle made room among the finishing")
	fifth := delivery(t, receive(t, ch))
	noMessage(t, ch, 300*time.Millisecond, "one slot: the fifth holds it")

	require.NoError(t, second.Ack())
	require.NoError(t, fourth.RetryAfter(0))
	require.NoError(t, fifth.Ack())
	// The fourth comes back, then the sixth: one at a time, never two.
	for range 2 {
		d := delivery(t, receive(t, ch))
		noMessage(t, ch, 200*time.Millisecond, "still one slot")
		require.NoError(t, d.Ack())
	}
	require.Zero(t, h.requestsLeft())
}

// A delivery past its work that its consumer never settles is released at
// Close like any other, and its finishing place is given back.
func TestFinishingDeliveryIsReleasedAtClose(t *testing.T) {
	t.Parallel()
	h, sub := slotSubscriber(t, "finishclose", 1, typedOnly)
	ch, err := sub.Subscribe(context.Background(), "finishclose")
	require.NoError(t, err)
	require.NoError(t, transport.NewPublisher(h.js).Publish(h.topo.RequestSubject("finishclose"), message.NewMessage("f", []byte(`{}`))))
	msg := receive(t, ch)
	d := delivery(t, msg)
	require.True(t, d.WorkDone())
	require.NoError(t, sub.Close())
	require.ErrorIs(t, context.Cause(msg.Context()), transport.ErrShuttingDown)
	require.ErrorIs(t, d.Ack(), transport.ErrAlreadySettled, "released at Close")
	require.False(t, d.WorkDone(), "settled: nothing to give back")
	require.EqualValues(t, 1, h.requestsLeft(), "released, not acked")
}

// Finishing < 0: WorkDone never gives a slot back.
func TestNoFinishingKeepsTheSlot(t *testing.T) {
	t.Parallel()
	h, sub := slotSubscriber(t, "nofinish", 1, typedOnly, func(c *transport.Config) { c.Finishing = -1 })
	ch, err := sub.Subscribe(context.Background(), "nofinish")
	require.NoError(t, err)
	pub := transport.NewPublisher(h.js)
	for _, id := range []string{"a", "b"} {
		require.NoError(t, pub.Publish(h.topo.RequestSubject("nofinish"), message.NewMessage(id, []byte(`{}`))))
	}
	first := delivery(t, receive(t, ch))
	require.False(t, first.WorkDone())
	noMessage(t, ch, 300*time.Millisecond, "the slot stays with the first")
	require.NoError(t, first.Ack())
	require.NoError(t, delivery(t, receive(t, ch)).Ack())
}
