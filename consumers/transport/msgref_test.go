package transport_test

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/personaq/personaq/consumers"
	"github.com/personaq/personaq/consumers/transport"
	"github.com/personaq/personaq/schemas"
)

// A delivery gives the message's headers and payload exactly as the stream
// stored them, repeated headers and the identity headers included, whether
// it keeps the fetched jetstream.Msg (KeepMsg) or rebuilds them from what
// it keeps instead (the default, which lets the parsed header map go).
func TestDeliveryHeadersAreTheStoredOnes(t *testing.T) {
	t.Parallel()
	for _, keep := range []bool{false, true} {
		t.Run(map[bool]string{false: "rebuilt", true: "KeepMsg"}[keep], func(t *testing.T) {
			t.Parallel()
			h := newHarness(t)
			require.NoError(t, consumers.Provision(context.Background(), h.js, h.topo, []consumers.ConsumerSpec{
				{Persona: "hdr", AckWait: 5 * time.Second, MaxAckPending: 4},
			}))
			sub, err := transport.NewSubscriber(transport.Config{
				JetStream: h.js, Stream: h.topo.RequestsStream, Slots: 1, FetchMaxWait: 200 * time.Millisecond,
				DrainTimeout: time.Second, KeepMsg: keep,
			})
			require.NoError(t, err)
			t.Cleanup(func() { _ = sub.Close() })

			m := nats.NewMsg(h.topo.RequestSubject("hdr"))
			m.Data = []byte(`{"request_id":"r-1"}`)
			m.Header.Set(jetstream.MsgIDHeader, "r-1")
			m.Header.Set(schemas.HeaderMessageUUID, "uuid-1")
			m.Header.Set(schemas.HeaderCorrelationID, "corr-1")
			m.Header.Add("X-Repeated", "one")
			m.Header.Add("X-Repeated", "two")
			m.Header.Set("X-Empty", "")
			ack, err := h.js.PublishMsg(context.Background(), m)
			require.NoError(t, err)
			stored, err := h.js.Stream(context.Background(), h.topo.RequestsStream)
			require.NoError(t, err)
			raw, err := stored.GetMsg(context.Background(), ack.Sequence)
			require.NoError(t, err)

			ch, err := sub.Subscribe(context.Background(), "hdr")
			require.NoError(t, err)
			d := delivery(t, receive(t, ch))
			require.Equal(t, raw.Header, d.Header())
			require.Equal(t, raw.Data, d.Data())
			require.Equal(t, "r-1", d.HeaderGet(jetstream.MsgIDHeader))
			require.Equal(t, "uuid-1", d.HeaderGet(schemas.HeaderMessageUUID))
			require.Equal(t, "corr-1", d.HeaderGet(schemas.HeaderCorrelationID))
			require.Equal(t, "one", d.HeaderGet("X-Repeated"))
			require.Empty(t, d.HeaderGet("X-Absent"))
			require.Equal(t, keep, d.Msg != nil, "Delivery.Msg is set only with KeepMsg")
			require.NoError(t, d.Ack())
			require.Zero(t, h.requestsLeft())
		})
	}
}
