package transport_test

import (
	"context"
	"testing"
	"time"

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

// requestsLeft is how many messages the requests stream holds.
func (h *harness) requestsLeft() uint64 {
	h.t.Helper()
	s, err := h.js.Stream(context.Background(), h.topo.RequestsStream)
	require.NoError(h.t, err)
	info, err := s.Info(context.Background())
	require.NoError(h.t, err)
	return info.State.Msgs
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
	first.Nack()
	require.Eventually(t, func() bool { return first.Context().Err() != nil }, 5*time.Second, 5*time.Millisecond,
		"the context of a settled message ends")

	again := receive(t, ch)
	require.Equal(t, "uuid-1", again.UUID, "stable across redeliveries")
	d, ok := transport.DeliveryFrom(again.Context())
	require.True(t, ok)
	require.EqualValues(t, 2, d.Delivered)
	again.Ack()
	require.Eventually(t, func() bool { return again.Context().Err() != nil }, 5*time.Second, 5*time.Millisecond)
	require.Eventually(t, func() bool { return h.requestsLeft() == 0 }, 5*time.Second, 5*time.Millisecond)
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
	got.Ack()
	require.Eventually(t, func() bool { return h.requestsLeft() == 1 }, 5*time.Second, 5*time.Millisecond)
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
