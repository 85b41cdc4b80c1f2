package api

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/personaq/personaq/consumers"
	"github.com/personaq/personaq/consumers/wire"
	"github.com/personaq/personaq/integration/testenv"
	"github.com/personaq/personaq/schemas"
)

// TestOutputHubLaggingStreamLosesNothing: chunks stored before an event
// stream starts come from the stream, later ones from the hub; a stream
// that falls behind the hub (its buffer, made tiny, overflows) follows its
// request on a consumer of its own from where it stood. Every chunk comes
// once, in order, and another request's never.
func TestOutputHubLaggingStreamLosesNothing(t *testing.T) {
	t.Parallel()
	n := testenv.StartNATS(t)
	js := n.JetStream(t)
	ctx := context.Background()
	topo := wire.Topology{}.WithDefaults()
	require.NoError(t, consumers.Provision(ctx, js, topo, nil))
	s, err := New(Config{JetStream: js, Tokens: []Token{{Name: "t", Secret: "a-token-long-enough-for-this", Scopes: AllScopes}}})
	require.NoError(t, err)
	s.outputHub.buffer = 2
	require.NoError(t, s.Start(ctx))
	t.Cleanup(s.Stop)
	require.Eventually(t, func() bool { s.outputHub.mu.Lock(); defer s.outputHub.mu.Unlock(); return s.outputHub.ready },
		10*time.Second, 10*time.Millisecond)
	publish := func(id string, i int) {
		c := &schemas.OutputChunk{SchemaVersion: 1, RequestID: id, Attempt: 1, Offset: int64(i), Data: "x", At: time.Now().UTC()}
		_, err := js.Publish(ctx, topo.OutputSubject(id, 1), schemas.MarshalOutputChunk(c))
		require.NoError(t, err)
	}
	for i := range 10 {
		publish("r-hub", i) // before the event stream: read from the stream
		publish("r-other", i)
	}
	fctx, cancel := context.WithCancel(ctx)
	defer cancel()
	evs, err := s.followOutput(fctx, "r-hub", 0)
	require.NoError(t, err)
	for i := 10; i < 200; i++ { // far more than the buffers hold while nobody reads
		publish("r-hub", i)
		publish("r-other", i)
	}
	var last uint64
	for i := range 200 {
		select {
		case ev := <-evs:
			require.Greater(t, ev.seq, last, "in order, once")
			last = ev.seq
			c, err := schemas.DecodeOutputChunk(ev.data)
			require.NoError(t, err)
			require.Equal(t, "r-hub", c.RequestID)
			require.Equal(t, int64(i), c.Offset, fmt.Sprintf("chunk %d", i))
		case <-time.After(10 * time.Second):
			t.Fatalf("chunk %d never came", i)
		}
	}
}
