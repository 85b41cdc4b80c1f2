package client

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/personaq/personaq/consumers"
	"github.com/personaq/personaq/consumers/wire"
	"github.com/personaq/personaq/integration/testenv"
	"github.com/personaq/personaq/schemas"
)

// TestOutputFollowerFillsGaps: what a caller's connection missed (dropped
// live, or published while it reconnected) is read back from the stream
// the moment a later chunk shows the gap; what it has seen is not passed
// on again, live or read back. A real server holds the chunks.
func TestOutputFollowerFillsGaps(t *testing.T) {
	t.Parallel()
	n := testenv.StartNATS(t)
	js := n.JetStream(t)
	topo := wire.Topology{}.WithDefaults()
	ctx := context.Background()
	require.NoError(t, consumers.Provision(ctx, js, topo, nil))
	c, err := New(Config{JetStream: js})
	require.NoError(t, err)
	at := time.Now().UTC()
	chunks := []*schemas.OutputChunk{
		{SchemaVersion: 1, RequestID: "r-gap", Attempt: 1, Offset: 0, Data: "one ", At: at},
		{SchemaVersion: 1, RequestID: "r-gap", Attempt: 1, Offset: 4, Data: "two ", At: at},
		{SchemaVersion: 1, RequestID: "r-gap", Attempt: 1, Offset: 8, Data: "three", At: at},
		{SchemaVersion: 1, RequestID: "r-gap", Attempt: 1, Offset: 13, Final: true, At: at},
	}
	raw := make([][]byte, len(chunks))
	for i, ch := range chunks {
		raw[i] = schemas.MarshalOutputChunk(ch)
		_, err := js.Publish(ctx, topo.OutputSubject("r-gap", 1), raw[i])
		require.NoError(t, err)
	}
	var got []string
	o := &outputFollower{c: c, requestID: "r-gap", next: map[int]int64{}, marks: map[markKey]bool{},
		f: func(ch *schemas.OutputChunk) { got = append(got, ch.Data) }}
	o.take(ctx, raw[0], true)
	o.take(ctx, raw[2], true) // "two " was missed: read back first
	o.take(ctx, raw[1], true) // arrives late: seen already
	o.take(ctx, raw[3], true)
	o.take(ctx, raw[3], true)
	o.catchUp(ctx, topo.OutputFilter("r-gap")) // a read back after all: nothing new
	require.Equal(t, []string{"one ", "two ", "three", ""}, got)
	require.True(t, o.has(chunks[3]))
}
