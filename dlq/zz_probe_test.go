package dlq_test

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/personaq/personaq/integration/testenv"
)

func TestProbe(t *testing.T) {
	n := testenv.StartNATS(t)
	js := n.JetStream(t)
	ctx := context.Background()
	_, err := js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{Name: "W", Subjects: []string{"w.>"}, Retention: jetstream.WorkQueuePolicy})
	require.NoError(t, err)
	_, err = js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{Name: "ADV", Subjects: []string{"$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES.W.*"}, Retention: jetstream.WorkQueuePolicy})
	require.NoError(t, err)
	c, err := js.CreateOrUpdateConsumer(ctx, "W", jetstream.ConsumerConfig{Durable: "c", FilterSubject: "w.a", AckPolicy: jetstream.AckExplicitPolicy, AckWait: 300 * time.Millisecond, MaxDeliver: 2})
	require.NoError(t, err)
	for i := 0; i < 3; i++ {
		_, err = js.Publish(ctx, "w.a", []byte("x"))
		require.NoError(t, err)
	}
	// ack the 2nd only
	for round := 0; round < 2; round++ {
		b, err := c.Fetch(3, jetstream.FetchMaxWait(2*time.Second))
		require.NoError(t, err)
		for m := range b.Messages() {
			md, _ := m.Metadata()
			t.Logf("got seq %d delivered %d", md.Sequence.Stream, md.NumDelivered)
			if md.Sequence.Stream == 2 {
				require.NoError(t, m.DoubleAck(ctx))
			}
		}
	}
	time.Sleep(1 * time.Second)
	info, err := c.Info(ctx)
	require.NoError(t, err)
	t.Logf("ackfloor %+v delivered %+v pending %d ackpending %d redelivered %d", info.AckFloor, info.Delivered, info.NumPending, info.NumAckPending, info.NumRedelivered)
	s, _ := js.Stream(ctx, "W")
	si, _ := s.Info(ctx)
	t.Logf("stream %+v", si.State)
	as, _ := js.Stream(ctx, "ADV")
	asi, _ := as.Info(ctx)
	t.Logf("adv %+v", asi.State)
	m, err := as.GetMsg(ctx, 1)
	if err == nil {
		t.Logf("adv msg %s %s", m.Subject, m.Data)
	}
	err = s.DeleteMsg(ctx, 2)
	t.Logf("delete missing: %v %#v", err, err)
	_, err = s.GetMsg(ctx, 2)
	t.Logf("get missing: %v", err)
}
