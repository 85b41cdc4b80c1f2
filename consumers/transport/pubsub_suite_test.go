package transport_test

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/ThreeDotsLabs/watermill/pubsub/tests"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/personaq/personaq/consumers/transport"
	"github.com/personaq/personaq/integration/testenv"
)

// suiteStream holds every topic of watermill's universal suite: a topic is
// a subject under suiteSubjects' prefix (the Publisher's topic is the
// subject), and each topic a subscriber binds to gets a durable consumer
// filtered to it (the Subscriber's topic names its durable).
const (
	suiteStream   = "WATERMILL_SUITE"
	suitePrefix   = "wm."
	suiteSubjects = suitePrefix + ">"
)

// suiteFull runs the universal suite with its full message counts (5,000
// to 10,000 messages in several tests): minutes under -race on a shared
// machine. Without it the suite runs with its short counts, which still
// run every test it has.
const suiteFull = "PERSONAQ_WATERMILL_SUITE_FULL"

// The transport passes watermill's universal Pub/Sub suite as a plain
// watermill consumer uses it: messages are settled by msg.Ack() and
// msg.Nack() (the default, TypedSettleOnly off).
func TestUniversalPubSubSuite(t *testing.T) {
	js := suiteServer(t)
	features := tests.Features{
		// A consumer group is a durable consumer: every subscriber of a
		// topic in one group shares the group's durable, and each group
		// gets every message.
		ConsumerGroups: true,
		// At least once: a message whose ack is lost, whose claim lapsed
		// or that was released at Close is redelivered.
		ExactlyOnceDelivery: false,
		// Off by design: a subscription works Config.Slots messages at
		// once, so a second message is handed out before the first is
		// acked (the suite's TestNoAck), and a nacked message comes back
		// behind later ones. With Slots: 1 and one subscriber the order
		// holds: TestUniversalPubSubOrderWithOneSlot runs the suite's
		// order tests so.
		GuaranteedOrder: false,
		// Messages live in a JetStream stream, not in a subscriber: a new
		// subscriber on the topic gets what the last one left.
		Persistent: true,
		// The server runs in this process; the transport's reconnect and
		// failover are tested by the integration suite (a restarted and a
		// clustered nats-server), not by a restart command.
		RestartServiceCommand: nil,
		// Off by design: a topic binds to one durable consumer, and what
		// that consumer acked is done for every subscriber on it (a new
		// consumer group, not a new subscriber, reads a topic from the
		// start).
		NewSubscriberReceivesOldMessages: false,
		// A topic must be a subject the suite's stream captures (the
		// suite's own names have no dots, so no wildcard could match all
		// of them); the suite appends "-N" to a topic, which stays one
		// token under the prefix.
		GenerateTopicFunc: func(tc tests.TestContext) string { return suitePrefix + string(tc.TestID) },
		// A message's context is the subscriber's (it carries the
		// Delivery), not the publisher's.
		ContextPreserved: false,
		ForceShort:       os.Getenv(suiteFull) == "",
	}
	tests.TestPubSub(t, features,
		func(t *testing.T) (message.Publisher, message.Subscriber) {
			return suitePubSub(t, js, "", 0)
		},
		func(t *testing.T, group string) (message.Publisher, message.Subscriber) {
			return suitePubSub(t, js, group, 0)
		})
}

// With one slot and one subscriber a topic's messages come in the order
// they were published, and the next one only once the last is settled:
// the universal suite's order tests.
func TestUniversalPubSubOrderWithOneSlot(t *testing.T) {
	js := suiteServer(t)
	features := tests.Features{
		ConsumerGroups:                      true,
		GuaranteedOrder:                     true,
		GuaranteedOrderWithSingleSubscriber: true,
		Persistent:                          true,
		GenerateTopicFunc:                   func(tc tests.TestContext) string { return suitePrefix + string(tc.TestID) },
		ForceShort:                          os.Getenv(suiteFull) == "",
	}
	constructor := func(t *testing.T) (message.Publisher, message.Subscriber) { return suitePubSub(t, js, "", 1) }
	for name, test := range map[string]func(*testing.T, tests.TestContext, tests.PubSubConstructor){
		"TestPublishSubscribeInOrder": tests.TestPublishSubscribeInOrder,
		"TestNoAck":                   tests.TestNoAck,
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			test(t, tests.TestContext{TestID: tests.NewTestID(), Features: features}, constructor)
		})
	}
}

// suiteServer starts a nats-server with the suite's stream.
func suiteServer(t *testing.T) jetstream.JetStream {
	t.Helper()
	js := testenv.StartNATS(t).JetStream(t)
	_, err := js.CreateStream(context.Background(), jetstream.StreamConfig{
		Name: suiteStream, Subjects: []string{suiteSubjects}, Storage: jetstream.FileStorage,
	})
	require.NoError(t, err)
	return js
}

// suitePubSub is the transport's Publisher and a Subscriber whose topics
// bind to the durables of group ("" : the topic's shared durable).
func suitePubSub(t *testing.T, js jetstream.JetStream, group string, slots int) (message.Publisher, message.Subscriber) {
	t.Helper()
	durable := func(topic string) string {
		name := "wm_" + strings.ReplaceAll(strings.TrimPrefix(topic, suitePrefix), ".", "_")
		if group != "" {
			name = group + "_" + name
		}
		return name
	}
	sub, err := transport.NewSubscriber(transport.Config{
		JetStream: js, Stream: suiteStream, Consumer: durable, Slots: slots,
		// The suite closes subscribers often and leaves messages unacked
		// at Close: short pulls and a short drain keep that quick.
		FetchMaxWait: 200 * time.Millisecond, DrainTimeout: time.Second,
	})
	require.NoError(t, err)
	// The suite closes what it subscribed, but for one case: its order
	// test defers require.NoError(t, sub.Close()), which closes the
	// subscriber before it subscribes. Close is idempotent.
	t.Cleanup(func() { _ = sub.Close() })
	return transport.NewPublisher(js), &suiteSubscriber{Subscriber: sub, js: js, durable: durable}
}

// suiteSubscriber provisions what a topic needs before the suite subscribes
// to it (watermill's SubscribeInitializer): its durable consumer, as
// consumers.Provision does for a persona.
type suiteSubscriber struct {
	*transport.Subscriber
	js      jetstream.JetStream
	durable func(topic string) string
}

var _ message.SubscribeInitializer = (*suiteSubscriber)(nil)

func (s *suiteSubscriber) SubscribeInitialize(topic string) error {
	_, err := s.js.CreateOrUpdateConsumer(context.Background(), suiteStream, jetstream.ConsumerConfig{
		Durable: s.durable(topic), FilterSubject: topic,
		AckPolicy: jetstream.AckExplicitPolicy, AckWait: 10 * time.Second,
		DeliverPolicy: jetstream.DeliverAllPolicy,
	})
	return err
}
