package transport

import (
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/personaq/personaq/schemas"
)

// headerMsg is a jetstream.Msg with only headers and data.
type headerMsg struct {
	jetstream.Msg
	hdr nats.Header
}

func (m headerMsg) Headers() nats.Header { return m.hdr }
func (m headerMsg) Data() []byte         { return []byte(`{}`) }

// A published header becomes metadata, except the transport's identity
// headers, which stay with the stored message (a forward gets its own).
// No metadata key steers a settle: settles are typed calls on the
// Delivery, so a publisher's header cannot term a request or delay it.
func TestPublishedHeadersBecomeMetadataButNotIdentity(t *testing.T) {
	t.Parallel()
	hdr := nats.Header{}
	hdr.Set(jetstream.MsgIDHeader, "id-1")
	hdr.Set(schemas.HeaderMessageUUID, "uuid-1")
	hdr.Set("personaq_term_reason", "injected")
	hdr.Set("X-Trace", "kept")
	wm := toWatermill(headerMsg{hdr: hdr}, &Delivery{Stream: "S", Sequence: 1, Delivered: 1})
	require.Equal(t, "uuid-1", wm.UUID)
	require.Empty(t, wm.Metadata.Get(jetstream.MsgIDHeader))
	require.Empty(t, wm.Metadata.Get(schemas.HeaderMessageUUID))
	require.Equal(t, "kept", wm.Metadata.Get("X-Trace"))
	require.Equal(t, "injected", wm.Metadata.Get("personaq_term_reason"), "plain metadata: nothing reads it")
}

// A Delivery made outside a Subscriber settles nothing and reports no
// error: stage tests build them by hand.
func TestDeliveryOutsideASubscriberSettlesNothing(t *testing.T) {
	t.Parallel()
	d := &Delivery{Stream: "S", Sequence: 1}
	require.NoError(t, d.Ack())
	require.NoError(t, d.Term("x"))
	require.NoError(t, d.RetryAfter(1))
	require.NoError(t, d.Release(1))
	d.Abandon()
}

// A heartbeat is sent while the claim holds and never once a settle is
// going out: the server matches InProgress by stream sequence alone, so a
// heartbeat after our nak would reset the timer of the message's next
// delivery.
func TestClaimSendsNoHeartbeatOnceSettling(t *testing.T) {
	t.Parallel()
	now := time.Now()
	for _, tc := range []struct {
		name     string
		prepare  func(c *claim)
		at       time.Time
		wantSent bool
		wantLost bool
	}{
		{"held", func(*claim) {}, now.Add(time.Second), true, false},
		{"settling", func(c *claim) { c.settle() }, now.Add(time.Second), false, false},
		{"lapsed", func(*claim) {}, now.Add(9 * time.Second), false, true},
		{"fenced", func(c *claim) { c.lose(ErrLeaseLost) }, now.Add(time.Second), false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newClaim(10*time.Second, now, func(error) {})
			tc.prepare(c)
			calls := 0
			sent, err := c.beatIfDue(tc.at, func() error { calls++; return nil })
			require.NoError(t, err)
			require.Equal(t, tc.wantSent, sent)
			require.Equal(t, map[bool]int{true: 1, false: 0}[tc.wantSent], calls)
			require.Equal(t, tc.wantLost, c.isLost())
		})
	}
}

// dataMsg is a jetstream.Msg with a fixed payload slice.
type dataMsg struct {
	jetstream.Msg
	data []byte
}

func (m dataMsg) Data() []byte { return m.data }

// A payload read with headers is copied out of nats.go's buffer (which
// holds the header block before it); one without is kept as it is.
func TestPayloadLeavesTheHeaderBlockBehind(t *testing.T) {
	t.Parallel()
	buf := []byte("NATS/1.0\r\nNats-Msg-Id: r-1\r\n\r\n{\"x\":1}")
	m := dataMsg{data: buf[len(buf)-7:]}
	got := payloadOf(m, nats.Header{jetstream.MsgIDHeader: {"r-1"}})
	require.Equal(t, `{"x":1}`, string(got))
	require.NotSame(t, &m.data[0], &got[0], "copied: the header block is not held")
	plain := payloadOf(m, nil)
	require.Same(t, &m.data[0], &plain[0], "no headers: no copy")
}
