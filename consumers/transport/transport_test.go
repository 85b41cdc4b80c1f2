package transport_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/personaq/personaq/consumers"
	"github.com/personaq/personaq/consumers/transport"
	"github.com/personaq/personaq/integration/testenv"
)

// harness is an in-process JetStream server with personaq's streams.
type harness struct {
	t    *testing.T
	js   jetstream.JetStream
	topo consumers.Topology
}

func newHarness(t *testing.T) *harness {
	t.Helper()
	n := testenv.StartNATS(t)
	h := &harness{t: t, js: n.JetStream(t), topo: consumers.Topology{}.WithDefaults()}
	require.NoError(t, consumers.Provision(context.Background(), h.js, h.topo, nil))
	return h
}

// requestsLeft is how many requests are not settled yet.
func (h *harness) requestsLeft() uint64 {
	h.t.Helper()
	n, err := consumers.Unsettled(context.Background(), h.js, h.topo)
	require.NoError(h.t, err)
	return n
}

// ackFloor is the stream sequence the persona's consumer has acked up to.
func (h *harness) ackFloor(persona string) uint64 {
	h.t.Helper()
	c, err := h.js.Consumer(context.Background(), h.topo.RequestsStream, consumers.Durable(persona))
	require.NoError(h.t, err)
	info, err := c.Info(context.Background())
	require.NoError(h.t, err)
	return info.AckFloor.Stream
}

// subscriber provisions one persona's consumer and returns a subscriber on it.
func subscriber(t *testing.T, persona string, fetchWait time.Duration) (*harness, *transport.Subscriber) {
	t.Helper()
	h := newHarness(t)
	require.NoError(t, consumers.Provision(context.Background(), h.js, h.topo, []consumers.ConsumerSpec{
		{Persona: persona, AckWait: 5 * time.Second, MaxAckPending: 16},
	}))
	sub, err := transport.NewSubscriber(transport.Config{
		JetStream: h.js, Stream: h.topo.RequestsStream, Slots: 4, FetchMaxWait: fetchWait, DrainTimeout: time.Second,
	})
	require.NoError(t, err)
	t.Cleanup(func() { _ = sub.Close() })
	return h, sub
}

// delivery is the Delivery msg carries.
func delivery(t *testing.T, msg *message.Message) *transport.Delivery {
	t.Helper()
	d, ok := transport.DeliveryFrom(msg.Context())
	require.True(t, ok)
	return d
}

func receive(t *testing.T, ch <-chan *message.Message) *message.Message {
	t.Helper()
	select {
	case m := <-ch:
		return m
	case <-time.After(10 * time.Second):
		t.Fatal("no message")
		return nil
	}
}

// The watermill contract end to end: the subscriber hands out the UUID the
// publisher sent, the same on a redelivery, and a message's context ends
// once it is settled.
func TestTransportKeepsTheUUIDAndEndsTheContextOnSettle(t *testing.T) {
	t.Parallel()
	h, sub := subscriber(t, "uuid", 200*time.Millisecond)
	ch, err := sub.Subscribe(context.Background(), "uuid")
	require.NoError(t, err)
	pub := transport.NewPublisher(h.js)
	require.NoError(t, pub.Publish(h.topo.RequestSubject("uuid"), message.NewMessage("uuid-1", []byte(`{}`))))

	first := receive(t, ch)
	require.Equal(t, "uuid-1", first.UUID)
	require.NoError(t, delivery(t, first).Release(0))
	require.Error(t, first.Context().Err(), "the context of a settled message ends")
	require.True(t, isNacked(first), "watermill sees the release as a nack")

	again := receive(t, ch)
	require.Equal(t, "uuid-1", again.UUID, "stable across redeliveries")
	d := delivery(t, again)
	require.EqualValues(t, 2, d.Delivered)
	require.NoError(t, d.Ack())
	require.Error(t, again.Context().Err())
	require.Zero(t, h.requestsLeft(), "the ack was confirmed before Ack returned")
}

func isNacked(msg *message.Message) bool {
	select {
	case <-msg.Nacked():
		return true
	default:
		return false
	}
}

// A publish the server dropped as a duplicate is reported, and the same
// UUID on another topic (a forwarded message) is stored, not dropped.
func TestPublisherReportsDuplicatesAndScopesIDsByTopic(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	pub := transport.NewPublisher(h.js)
	one, other := h.topo.RequestSubject("dup-a"), h.topo.RequestSubject("dup-b")
	require.NoError(t, pub.Publish(one, message.NewMessage("same", []byte(`1`))))
	require.ErrorIs(t, pub.Publish(one, message.NewMessage("same", []byte(`1`))), transport.ErrDuplicate)
	require.NoError(t, pub.Publish(other, message.NewMessage("same", []byte(`1`))), "another topic is another message")
	require.EqualValues(t, 2, h.requestsLeft())
}

// A received message published again — forwarded by a handler to another
// subject of the same stream — is stored as a message of its own with the
// same UUID, not dropped as a duplicate of the one it came from; the same
// message forwarded twice to one subject is reported.
func TestForwardedMessageGetsItsOwnID(t *testing.T) {
	t.Parallel()
	h, sub := subscriber(t, "fwd-src", 200*time.Millisecond)
	pub := transport.NewPublisher(h.js)
	src, dst := h.topo.RequestSubject("fwd-src"), h.topo.RequestSubject("fwd-dst")
	msgs, err := sub.Subscribe(context.Background(), "fwd-src")
	require.NoError(t, err)
	require.NoError(t, pub.Publish(src, message.NewMessage("fwd-uuid", []byte(`1`))))
	got := receive(t, msgs)
	require.Equal(t, "fwd-uuid", got.UUID)
	require.Empty(t, got.Metadata.Get(jetstream.MsgIDHeader), "the stored message's id stays with it")
	require.NoError(t, pub.Publish(dst, got), "a forward is a message of its own")
	require.ErrorIs(t, pub.Publish(dst, got), transport.ErrDuplicate, "the same forward twice is reported")
	require.NoError(t, delivery(t, got).Ack())
	require.EqualValues(t, 1, h.requestsLeft())
}

// Close returns within one fetch wait plus the drain, however long the
// subscriber has been idle-polling.
func TestSubscriberCloseReturnsWithinOneFetchWait(t *testing.T) {
	t.Parallel()
	const wait = time.Second
	_, sub := subscriber(t, "close", wait)
	_, err := sub.Subscribe(context.Background(), "close")
	require.NoError(t, err)
	t0 := time.Now()
	require.NoError(t, sub.Close())
	require.Less(t, time.Since(t0), wait+500*time.Millisecond)
}

// slotSubscriber is subscriber with slots and a short drain; opts change
// its config.
func slotSubscriber(t *testing.T, persona string, slots int, opts ...func(*transport.Config)) (*harness, *transport.Subscriber) {
	return ackWaitSubscriber(t, persona, slots, 5*time.Second, opts...)
}

func ackWaitSubscriber(t *testing.T, persona string, slots int, ackWait time.Duration, opts ...func(*transport.Config)) (*harness, *transport.Subscriber) {
	t.Helper()
	h := newHarness(t)
	require.NoError(t, consumers.Provision(context.Background(), h.js, h.topo, []consumers.ConsumerSpec{
		{Persona: persona, AckWait: ackWait, MaxAckPending: 16},
	}))
	cfg := transport.Config{
		JetStream: h.js, Stream: h.topo.RequestsStream, Slots: slots, FetchMaxWait: 200 * time.Millisecond,
		DrainTimeout: 200 * time.Millisecond,
	}
	for _, o := range opts {
		o(&cfg)
	}
	sub, err := transport.NewSubscriber(cfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = sub.Close() })
	return h, sub
}

// typedOnly is a subscriber that settles only through typed calls.
func typedOnly(c *transport.Config) { c.TypedSettleOnly = true }

// The typed settles send the settle before they return, in the caller's
// goroutine: the message is gone from the stream, its context ended and
// its slot free by then. With TypedSettleOnly a plain watermill Ack does
// not settle it (the Settle middleware does, for a router).
func TestSettleIsDoneWhenTheSettleMethodReturns(t *testing.T) {
	t.Parallel()
	h, sub := slotSubscriber(t, "inline", 1, typedOnly)
	ch, err := sub.Subscribe(context.Background(), "inline")
	require.NoError(t, err)
	pub := transport.NewPublisher(h.js)
	for _, id := range []string{"a", "b", "c"} {
		require.NoError(t, pub.Publish(h.topo.RequestSubject("inline"), message.NewMessage(id, []byte(`{}`))))
	}

	first := receive(t, ch)
	require.Equal(t, 1, sub.InFlight())
	require.NoError(t, delivery(t, first).Ack())
	require.Error(t, first.Context().Err(), "settled before Ack returned")
	// Confirmed: the server's ack floor covers it when Ack returns. (The
	// unsettled count, pending + unacknowledged, is read from two counters
	// the server updates apart: the next delivery can show in neither.)
	require.GreaterOrEqual(t, h.ackFloor("inline"), delivery(t, first).Sequence, "the ack was confirmed by the server")

	// The one slot was given back: the next message comes, and it alone is
	// in flight. (Reading InFlight right after Ack raced with that next
	// fetch, which may already hold it: 1 run in 30 under CPU load.)
	second := receive(t, ch)
	require.Equal(t, 1, sub.InFlight(), "the settled message left the in-flight set")
	require.NoError(t, delivery(t, second).Term("test"))
	require.GreaterOrEqual(t, h.ackFloor("inline"), delivery(t, second).Sequence, "the term was confirmed by the server")

	third := receive(t, ch)
	require.NoError(t, delivery(t, third).RetryAfter(0))
	again := receive(t, ch)
	require.Equal(t, third.UUID, again.UUID)
	d := delivery(t, again)
	require.EqualValues(t, 2, d.Delivered)
	again.Ack() // watermill's own ack: not a settle with TypedSettleOnly
	require.Equal(t, 1, sub.InFlight())
	require.NoError(t, d.Ack())
	require.ErrorIs(t, d.Ack(), transport.ErrAlreadySettled, "a second settle changes nothing")
	require.Zero(t, h.requestsLeft())
}

// A message its consumer never settles (a handler that ignores its
// cancelled context) does not hold up Close: the hard stop releases it to
// another replica, and a settle after that changes nothing.
func TestUnsettledMessageIsReleasedAtClose(t *testing.T) {
	t.Parallel()
	h, sub := slotSubscriber(t, "stuck", 2)
	ch, err := sub.Subscribe(context.Background(), "stuck")
	require.NoError(t, err)
	require.NoError(t, transport.NewPublisher(h.js).Publish(h.topo.RequestSubject("stuck"), message.NewMessage("s", []byte(`{}`))))
	stuck := receive(t, ch)

	closed := make(chan struct{})
	go func() { _ = sub.Close(); close(closed) }()
	select {
	case <-closed:
	case <-time.After(10 * time.Second):
		t.Fatal("Close waited for a message nobody settles")
	}
	require.ErrorIs(t, context.Cause(stuck.Context()), transport.ErrShuttingDown)
	require.ErrorIs(t, delivery(t, stuck).Ack(), transport.ErrAlreadySettled, "too late: it was released")
	require.EqualValues(t, 1, h.requestsLeft(), "released, not acked")

	cons, err := h.js.Consumer(context.Background(), h.topo.RequestsStream, consumers.Durable("stuck"))
	require.NoError(t, err)
	batch, err := cons.Fetch(1, jetstream.FetchMaxWait(2*time.Second))
	require.NoError(t, err)
	got := 0
	for m := range batch.Messages() {
		got++
		md, err := m.Metadata()
		require.NoError(t, err)
		require.EqualValues(t, 2, md.NumDelivered, "redelivered at once (Nak), not after AckWait")
	}
	require.Equal(t, 1, got)
}

// Abandon settles nothing: the slot is freed and the context ended, but
// the message stays pending on the server (redelivered after AckWait).
func TestAbandonLeavesTheMessageToTheServer(t *testing.T) {
	t.Parallel()
	h, sub := slotSubscriber(t, "abandon", 1)
	ch, err := sub.Subscribe(context.Background(), "abandon")
	require.NoError(t, err)
	require.NoError(t, transport.NewPublisher(h.js).Publish(h.topo.RequestSubject("abandon"), message.NewMessage("a", []byte(`{}`))))
	msg := receive(t, ch)
	d := delivery(t, msg)
	d.Abandon()
	require.Error(t, msg.Context().Err())
	require.Zero(t, sub.InFlight())
	require.ErrorIs(t, d.Ack(), transport.ErrAlreadySettled, "an abandoned delivery settles nothing after")
	cons, err := h.js.Consumer(context.Background(), h.topo.RequestsStream, consumers.Durable("abandon"))
	require.NoError(t, err)
	info, err := cons.Info(context.Background())
	require.NoError(t, err)
	require.Equal(t, 1, info.NumAckPending, "still pending: nothing was sent")
	require.EqualValues(t, 1, h.requestsLeft())
}

// Through a watermill Router with the Settle middleware, a handler that
// returns nil has its message acked and one that returns an error has it
// redelivered at once; a handler that settles itself is left alone.
func TestSettleMiddlewareSettlesWhatTheHandlerReturned(t *testing.T) {
	t.Parallel()
	h, sub := slotSubscriber(t, "router", 4)
	pub := transport.NewPublisher(h.js)
	for _, id := range []string{"ok", "fails-once", "terms"} {
		require.NoError(t, pub.Publish(h.topo.RequestSubject("router"), message.NewMessage(id, []byte(id))))
	}
	router, err := message.NewRouter(message.RouterConfig{}, watermill.NopLogger{})
	require.NoError(t, err)
	router.AddMiddleware(transport.Settle)
	seen := make(chan string, 16)
	router.AddConsumerHandler("router", "router", sub, func(msg *message.Message) error {
		d := delivery(t, msg)
		seen <- fmt.Sprintf("%s/%d", msg.UUID, d.Delivered)
		switch {
		case msg.UUID == "fails-once" && d.Delivered == 1:
			return errors.New("try again")
		case msg.UUID == "terms":
			return d.Term("done with it")
		}
		return nil
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = router.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done; _ = router.Close() })
	require.Eventually(t, func() bool { return h.requestsLeft() == 0 }, 10*time.Second, 10*time.Millisecond)
	got := map[string]bool{}
	for len(seen) > 0 {
		got[<-seen] = true
	}
	require.Equal(t, map[string]bool{"ok/1": true, "fails-once/1": true, "fails-once/2": true, "terms/1": true}, got)
}

// settled waits for msg's context to end: its settle is done.
func settled(t *testing.T, msg *message.Message) {
	t.Helper()
	select {
	case <-msg.Context().Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the message was not settled")
	}
}

// A plain watermill consumer settles by msg.Ack() and msg.Nack(): an Ack
// acks the message on the server, a Nack has it redelivered at once. A
// typed settle after a plain one is refused, not sent too: had the ack
// after the Nack gone out, the message would not come back.
func TestPlainAckAndNackSettle(t *testing.T) {
	t.Parallel()
	h, sub := slotSubscriber(t, "plain", 1)
	ch, err := sub.Subscribe(context.Background(), "plain")
	require.NoError(t, err)
	pub := transport.NewPublisher(h.js)
	for _, id := range []string{"a", "b"} {
		require.NoError(t, pub.Publish(h.topo.RequestSubject("plain"), message.NewMessage(id, []byte(`{}`))))
	}

	first := receive(t, ch)
	require.True(t, first.Ack())
	require.ErrorIs(t, delivery(t, first).Term("late"), transport.ErrAlreadySettled, "the plain ack came first")
	settled(t, first)
	require.Eventually(t, func() bool { return h.requestsLeft() == 1 }, 10*time.Second, 10*time.Millisecond, "acked on the server")

	second := receive(t, ch)
	require.Equal(t, "b", second.UUID)
	require.True(t, second.Nack())
	require.ErrorIs(t, delivery(t, second).Ack(), transport.ErrAlreadySettled, "the plain nack came first")
	settled(t, second)

	again := receive(t, ch)
	require.Equal(t, "b", again.UUID, "a plain Nack redelivers")
	d := delivery(t, again)
	require.EqualValues(t, 2, d.Delivered)
	require.NoError(t, d.Ack(), "a typed settle works on a plain subscriber")
	again.Ack() // the typed ack marked it acked already: nothing more is sent
	require.Zero(t, h.requestsLeft())
	require.Zero(t, sub.InFlight())
}

// A plain consumer's message is heartbeated like any other: held past its
// AckWait it is not redelivered, and a plain Ack then still settles it.
func TestPlainConsumerKeepsItsClaimPastAckWait(t *testing.T) {
	t.Parallel()
	const ackWait = time.Second
	h, sub := ackWaitSubscriber(t, "plain-long", 2, ackWait)
	ch, err := sub.Subscribe(context.Background(), "plain-long")
	require.NoError(t, err)
	require.NoError(t, transport.NewPublisher(h.js).Publish(h.topo.RequestSubject("plain-long"), message.NewMessage("long", []byte(`{}`))))
	msg := receive(t, ch)
	select {
	case m := <-ch:
		t.Fatalf("redelivered while held: %s", m.UUID)
	case <-time.After(3 * ackWait):
	}
	require.True(t, delivery(t, msg).Held())
	require.True(t, msg.Ack())
	settled(t, msg)
	require.Eventually(t, func() bool { return h.requestsLeft() == 0 }, 10*time.Second, 10*time.Millisecond)
}

// The fetch loop ends with the Subscribe context (its channel closes),
// but the heartbeats do not: a message still in flight while a router
// drains keeps its claim past AckWait and can still be settled.
func TestHeartbeatsOutliveTheSubscribeContext(t *testing.T) {
	t.Parallel()
	const ackWait = time.Second
	h, sub := ackWaitSubscriber(t, "drain-beats", 2, ackWait)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ch, err := sub.Subscribe(ctx, "drain-beats")
	require.NoError(t, err)
	require.NoError(t, transport.NewPublisher(h.js).Publish(h.topo.RequestSubject("drain-beats"), message.NewMessage("long", []byte(`{}`))))
	msg := receive(t, ch)

	cancel()
	select {
	case m, ok := <-ch:
		require.False(t, ok, "fetched after the Subscribe context ended: %v", m)
	case <-time.After(5 * time.Second):
		t.Fatal("the channel stayed open after the Subscribe context ended")
	}
	time.Sleep(3 * ackWait)
	d := delivery(t, msg)
	require.True(t, d.Held(), "the claim lapsed: heartbeats stopped with the Subscribe context")
	require.NoError(t, d.Ack())
	require.Zero(t, h.requestsLeft())
}

// A router started just as its replica stops must stop too: Subscribe on a
// closed subscriber, or with its context done, gives a closed channel, not
// an error (an error would leave the router's other handlers unstarted and
// watermill waiting for them for ever). A consumer that does not exist
// still fails, at Bind or Subscribe.
func TestSubscribeWhileStoppingGivesAClosedChannel(t *testing.T) {
	t.Parallel()
	_, sub := subscriber(t, "stopping", 100*time.Millisecond)
	require.NoError(t, sub.Bind(context.Background(), "stopping"))
	require.Error(t, sub.Bind(context.Background(), "no-such-persona"))
	_, err := sub.Subscribe(context.Background(), "no-such-persona")
	require.Error(t, err)

	done, cancel := context.WithCancel(context.Background())
	cancel()
	ch, err := sub.Subscribe(done, "stopping")
	require.NoError(t, err)
	_, open := <-ch
	require.False(t, open, "closed at once: the context was done")

	require.NoError(t, sub.Close())
	ch, err = sub.Subscribe(context.Background(), "stopping")
	require.NoError(t, err)
	_, open = <-ch
	require.False(t, open, "closed at once: the subscriber was closed")
}
