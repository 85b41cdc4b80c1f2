package consumers_test

// Tests of how JetStream and nats.go behave, for each fact the runtime
// relies on (DESIGN.md, "How the broker and client really behave").

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/personaq/personaq/consumers"
	"github.com/personaq/personaq/consumers/transport"
	"github.com/personaq/personaq/integration/testenv"
)

func factStream(t *testing.T, name string, retention jetstream.RetentionPolicy) (jetstream.JetStream, jetstream.Stream) {
	t.Helper()
	js := testenv.StartNATS(t).JetStream(t)
	s, err := js.CreateStream(context.Background(), jetstream.StreamConfig{
		Name: name, Subjects: []string{name + ".>"}, Retention: retention,
	})
	require.NoError(t, err)
	return js, s
}

func durable(t *testing.T, s jetstream.Stream, cfg jetstream.ConsumerConfig) jetstream.Consumer {
	t.Helper()
	cfg.AckPolicy = jetstream.AckExplicitPolicy
	c, err := s.CreateOrUpdateConsumer(context.Background(), cfg)
	require.NoError(t, err)
	return c
}

func next(t *testing.T, c jetstream.Consumer, wait time.Duration) (jetstream.Msg, time.Time) {
	t.Helper()
	m, err := c.Next(jetstream.FetchMaxWait(wait))
	require.NoError(t, err)
	return m, time.Now()
}

func publishN(t *testing.T, js jetstream.JetStream, subject string, n int) {
	t.Helper()
	for range n {
		_, err := js.Publish(context.Background(), subject, []byte("x"))
		require.NoError(t, err)
	}
}

// NakWithDelay(d) on a consumer with AckWait only comes back after d, not
// before: retry delays can be NakWithDelay.
func TestFactNakWithDelayRedeliversAfterTheDelay(t *testing.T) {
	t.Parallel()
	js, s := factStream(t, "F1", jetstream.WorkQueuePolicy)
	c := durable(t, s, jetstream.ConsumerConfig{Durable: "d", AckWait: 5 * time.Second})
	publishN(t, js, "F1.x", 1)
	m, _ := next(t, c, time.Second)
	const d = 300 * time.Millisecond
	require.NoError(t, m.NakWithDelay(d))
	naked := time.Now()
	m2, at := next(t, c, 5*time.Second)
	require.GreaterOrEqual(t, at.Sub(naked), d)
	require.Less(t, at.Sub(naked), d+time.Second)
	md, err := m2.Metadata()
	require.NoError(t, err)
	require.EqualValues(t, 2, md.NumDelivered)
}

// With a BackOff list the same NakWithDelay comes back later and later
// (d + BackOff[n] − BackOff[0], nats-server#4726): Provision never sets it.
func TestFactBackOffShiftsNakWithDelay(t *testing.T) {
	t.Parallel()
	js, s := factStream(t, "F2", jetstream.WorkQueuePolicy)
	c := durable(t, s, jetstream.ConsumerConfig{Durable: "d", MaxDeliver: 10,
		BackOff: []time.Duration{500 * time.Millisecond, 2 * time.Second, 4 * time.Second}})
	publishN(t, js, "F2.x", 1)
	const d = 100 * time.Millisecond
	var gaps []time.Duration
	m, _ := next(t, c, time.Second)
	for range 2 {
		require.NoError(t, m.NakWithDelay(d))
		naked := time.Now()
		var at time.Time
		m, at = next(t, c, 10*time.Second)
		gaps = append(gaps, at.Sub(naked))
	}
	require.Less(t, gaps[0], time.Second, "first nak honours d")
	require.Greater(t, gaps[1], time.Second, "second nak is pushed out by the BackOff list: %v", gaps)
}

func TestProvisionSetsNoBackOffAndSharedMaxAckPending(t *testing.T) {
	t.Parallel()
	js := testenv.StartNATS(t).JetStream(t)
	spec := consumers.ConsumerSpec{Persona: "p", AckWait: time.Second, MaxAckPending: 64}
	require.NoError(t, consumers.Provision(context.Background(), js, consumers.Topology{}, []consumers.ConsumerSpec{spec}))
	require.NoError(t, consumers.Provision(context.Background(), js, consumers.Topology{}, []consumers.ConsumerSpec{spec}), "idempotent")
	c, err := js.Consumer(context.Background(), "PERSONAQ_REQUESTS", consumers.Durable("p"))
	require.NoError(t, err)
	cfg := c.CachedInfo().Config
	require.Empty(t, cfg.BackOff)
	require.Equal(t, 64, cfg.MaxAckPending)
	require.Equal(t, "personaq.requests.p", cfg.FilterSubject)
	q, err := js.Stream(context.Background(), "PERSONAQ_QUARANTINE")
	require.NoError(t, err)
	require.Equal(t, jetstream.LimitsPolicy, q.CachedInfo().Config.Retention, "quarantine is browsable, not a work queue")
}

// InProgress resets the AckWait clock: heartbeats keep a long attempt.
func TestFactInProgressPreventsRedelivery(t *testing.T) {
	t.Parallel()
	js, s := factStream(t, "F3", jetstream.WorkQueuePolicy)
	c := durable(t, s, jetstream.ConsumerConfig{Durable: "d", AckWait: 300 * time.Millisecond})
	publishN(t, js, "F3.x", 1)
	m, _ := next(t, c, time.Second)
	for range 6 { // 1.2s, four AckWaits
		time.Sleep(200 * time.Millisecond)
		require.NoError(t, m.InProgress())
	}
	_, err := c.Next(jetstream.FetchMaxWait(200 * time.Millisecond))
	require.ErrorIs(t, err, nats.ErrTimeout, "not redelivered while heartbeats flow")
	require.NoError(t, m.DoubleAck(context.Background()))
}

// Term counts as an ack: a work-queue stream deletes the message, so the
// quarantine record must be stored first.
func TestFactTermDeletesFromWorkQueue(t *testing.T) {
	t.Parallel()
	js, s := factStream(t, "F4", jetstream.WorkQueuePolicy)
	c := durable(t, s, jetstream.ConsumerConfig{Durable: "d", AckWait: time.Second})
	publishN(t, js, "F4.x", 1)
	m, _ := next(t, c, time.Second)
	require.NoError(t, m.TermWithReason("test"))
	require.Eventually(t, func() bool {
		info, err := s.Info(context.Background())
		return err == nil && info.State.Msgs == 0
	}, 2*time.Second, 10*time.Millisecond)
}

// MaxAckPending is per consumer, shared by every replica pulling from it.
func TestFactMaxAckPendingIsSharedByReplicas(t *testing.T) {
	t.Parallel()
	js, s := factStream(t, "F5", jetstream.WorkQueuePolicy)
	durable(t, s, jetstream.ConsumerConfig{Durable: "d", AckWait: 5 * time.Second, MaxAckPending: 3})
	publishN(t, js, "F5.x", 10)
	total := 0
	for range 2 { // two "replicas", separate consumer handles
		c, err := js.Consumer(context.Background(), "F5", "d")
		require.NoError(t, err)
		b, err := c.Fetch(5, jetstream.FetchMaxWait(300*time.Millisecond))
		require.NoError(t, err)
		for range b.Messages() {
			total++
		}
	}
	require.Equal(t, 3, total, "both replicas together got MaxAckPending messages")
}

// Nats-Msg-Id deduplicates within the stream's duplicate window.
func TestFactMsgIDDeduplicates(t *testing.T) {
	t.Parallel()
	js, _ := factStream(t, "F6", jetstream.LimitsPolicy)
	for i, wantDup := range []bool{false, true} {
		ack, err := js.Publish(context.Background(), "F6.x", []byte("x"), jetstream.WithMsgID("same"))
		require.NoError(t, err)
		require.Equal(t, wantDup, ack.Duplicate, "publish %d", i+1)
	}
}

// The subscriber never holds more messages than it has free slots, so no
// message waits in a client buffer while its AckWait runs (nats.go#1929).
func TestSubscriberFetchesNoMoreThanFreeSlots(t *testing.T) {
	t.Parallel()
	js := testenv.StartNATS(t).JetStream(t)
	spec := consumers.ConsumerSpec{Persona: "p", AckWait: 5 * time.Second, MaxAckPending: 100}
	require.NoError(t, consumers.Provision(context.Background(), js, consumers.Topology{}, []consumers.ConsumerSpec{spec}))
	publishN(t, js, "personaq.requests.p", 10)
	sub, err := transport.NewSubscriber(transport.Config{JetStream: js, Stream: "PERSONAQ_REQUESTS", Slots: 2, FetchMaxWait: 100 * time.Millisecond})
	require.NoError(t, err)
	ch, err := sub.Subscribe(context.Background(), "p")
	require.NoError(t, err)
	first, second := <-ch, <-ch // hold both slots without settling
	c, err := js.Consumer(context.Background(), "PERSONAQ_REQUESTS", consumers.Durable("p"))
	require.NoError(t, err)
	require.Never(t, func() bool {
		info, err := c.Info(context.Background())
		return err != nil || info.NumAckPending > 2
	}, 500*time.Millisecond, 50*time.Millisecond)
	first.Ack()
	second.Ack()
	got := 2
	for got < 10 {
		(<-ch).Ack()
		got++
	}
	require.NoError(t, sub.Close())
}

// A publish with "Nats-Expected-Last-Subject-Sequence: 0" checked against a
// wildcard subject (Nats-Expected-Last-Subject-Sequence-Subject) is a
// create-once across every subject the wildcard matches: of many writers
// racing with different subjects, exactly one is stored and the others get
// JSErrCodeStreamWrongLastSequence; a last-by-subject get with the same
// wildcard reads the one stored. Terminal records rely on both.
func TestFactCreateOnceAcrossSubjectsWithAWildcardCheck(t *testing.T) {
	t.Parallel()
	js, s := factStream(t, "F9", jetstream.LimitsPolicy)
	const writers = 8
	var wg sync.WaitGroup
	errs := make([]error, writers)
	for i := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			subj := fmt.Sprintf("F9.outcome%d.persona.req-1", i)
			_, errs[i] = js.Publish(context.Background(), subj, []byte(subj),
				jetstream.WithExpectLastSequenceForSubject(0, "F9.*.*.req-1"))
		}()
	}
	wg.Wait()
	stored := ""
	for i, err := range errs {
		if err == nil {
			require.Empty(t, stored, "a second writer was stored")
			stored = fmt.Sprintf("F9.outcome%d.persona.req-1", i)
			continue
		}
		var apiErr *jetstream.APIError
		require.ErrorAs(t, err, &apiErr)
		require.Equal(t, jetstream.JSErrCodeStreamWrongLastSequence, apiErr.ErrorCode)
	}
	require.NotEmpty(t, stored)
	raw, err := s.GetLastMsgForSubject(context.Background(), "F9.*.*.req-1")
	require.NoError(t, err)
	require.Equal(t, stored, raw.Subject)
	_, err = s.GetLastMsgForSubject(context.Background(), "F9.*.*.req-2")
	require.ErrorIs(t, err, jetstream.ErrMsgNotFound)
	// Another request's record is its own create-once.
	_, err = js.Publish(context.Background(), "F9.succeeded.persona.req-2", nil, jetstream.WithExpectLastSequenceForSubject(0, "F9.*.*.req-2"))
	require.NoError(t, err)
}

// A settle sent as a request is answered by the server — which is how the
// runtime confirms it — and so is the same settle sent again, as the
// runtime does when no answer came in a failover. The repeat acts on
// whatever delivery of that stream sequence is current: a repeated nak
// after the message was delivered again nak's the new delivery. That is
// why a settle is repeated only while its claim holds (no other delivery
// can exist then), and an ack of a message no longer pending is harmless.
func TestFactSettleRequestsAreAnsweredAndRepeatable(t *testing.T) {
	t.Parallel()
	js, s := factStream(t, "F9", jetstream.WorkQueuePolicy)
	c := durable(t, s, jetstream.ConsumerConfig{Durable: "d", AckWait: 5 * time.Second})
	publishN(t, js, "F9.x", 1)
	m, _ := next(t, c, time.Second)
	nc := js.Conn()
	_, err := nc.Request(m.Reply(), []byte("-NAK"), time.Second)
	require.NoError(t, err, "a nak sent as a request is answered")
	again, _ := next(t, c, time.Second)
	_, err = nc.Request(m.Reply(), []byte("-NAK"), time.Second)
	require.NoError(t, err, "a repeated nak is answered")
	// nats-server matches a settle by stream sequence: the repeat hit the
	// current delivery.
	third, _ := next(t, c, time.Second)
	require.Equal(t, mustMeta(t, again).Sequence.Stream, mustMeta(t, third).Sequence.Stream)
	_, err = nc.Request(third.Reply(), []byte("+ACK"), time.Second)
	require.NoError(t, err)
	_, err = nc.Request(third.Reply(), []byte("+ACK"), time.Second)
	require.NoError(t, err, "an ack of a message no longer pending is answered")
	_, err = c.Next(jetstream.FetchMaxWait(300 * time.Millisecond))
	require.ErrorIs(t, err, nats.ErrTimeout, "acked once for good")
}

func mustMeta(t *testing.T, m jetstream.Msg) *jetstream.MsgMetadata {
	t.Helper()
	md, err := m.Metadata()
	require.NoError(t, err)
	return md
}
