package transport_test

import (
	"context"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/stretchr/testify/require"

	"github.com/personaq/personaq/consumers"
	"github.com/personaq/personaq/consumers/transport"
	"github.com/personaq/personaq/integration/testenv"
)

// A delivery names the connection it came on: the same for deliveries
// with no reconnect between them, another after the server restarted.
func TestDeliveryNamesItsConnection(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	n := testenv.StartNATS(t)
	js := n.JetStream(t)
	topo := consumers.Topology{}.WithDefaults()
	require.NoError(t, consumers.Provision(ctx, js, topo, []consumers.ConsumerSpec{
		{Persona: "conn", AckWait: 5 * time.Second, MaxAckPending: 16},
	}))
	sub, err := transport.NewSubscriber(transport.Config{
		JetStream: js, Stream: topo.RequestsStream, Slots: 4, FetchMaxWait: 100 * time.Millisecond, DrainTimeout: time.Second,
	})
	require.NoError(t, err)
	t.Cleanup(func() { _ = sub.Close() })
	ch, err := sub.Subscribe(ctx, "conn")
	require.NoError(t, err)
	pub := transport.NewPublisher(js)

	first := func(uuid string) *transport.Delivery {
		t.Helper()
		require.NoError(t, pub.Publish(topo.RequestSubject("conn"), message.NewMessage(uuid, []byte(`{}`))))
		d := delivery(t, receive(t, ch))
		require.NoError(t, d.Ack())
		return d
	}
	a, b := first("c-1"), first("c-2")
	require.NotZero(t, a.Connection)
	require.Equal(t, a.Connection, b.Connection, "no reconnect between them")

	n.Restart(t)
	nc := js.Conn()
	require.Eventually(t, func() bool { return nc.IsConnected() && nc.Stats().Reconnects == 1 }, 10*time.Second, 10*time.Millisecond)
	require.Eventually(t, func() bool {
		return pub.Publish(topo.RequestSubject("conn"), message.NewMessage("c-3", []byte(`{}`))) == nil
	}, 10*time.Second, 100*time.Millisecond)
	c := delivery(t, receive(t, ch))
	require.NoError(t, c.Ack())
	require.NotEqual(t, a.Connection, c.Connection, "the server restarted in between")
}
