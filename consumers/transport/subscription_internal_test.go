package transport

import (
	"testing"

	"github.com/ThreeDotsLabs/watermill/components/delay"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"
)

// headerMsg is a jetstream.Msg with only headers and data.
type headerMsg struct {
	jetstream.Msg
	hdr nats.Header
}

func (m headerMsg) Headers() nats.Header { return m.hdr }
func (m headerMsg) Data() []byte         { return []byte(`{}`) }

// A publisher's header named like the pipeline's own settle metadata must
// not decide how the message is settled (term it, or delay its release).
func TestPublishedHeadersCannotSteerTheSettle(t *testing.T) {
	t.Parallel()
	hdr := nats.Header{}
	hdr.Set(MetaTermReason, "injected")
	hdr.Set(delay.DelayedForKey, "10m")
	hdr.Set(delay.DelayedUntilKey, "2099-01-01T00:00:00Z")
	hdr.Set("X-Trace", "kept")
	wm := toWatermill(headerMsg{hdr: hdr}, &Delivery{Stream: "S", Sequence: 1, Delivered: 1})
	require.Empty(t, wm.Metadata.Get(MetaTermReason))
	require.Empty(t, wm.Metadata.Get(delay.DelayedForKey))
	require.Empty(t, wm.Metadata.Get(delay.DelayedUntilKey))
	require.Equal(t, "kept", wm.Metadata.Get("X-Trace"))
}
