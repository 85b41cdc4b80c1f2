package consumers

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/personaq/personaq/consumers/transport"
	"github.com/personaq/personaq/integration/testenv"
)

// Without a ledger, a retry is remembered only where the consumer's state
// cannot go back unseen: the requests stream on the standalone server this
// replica is connected to, through its own JetStream API. A restart of that
// server is a reconnect, after which what was remembered is not taken, and
// where the stream is stored is read again.
func TestRetriesAreRememberedOnlyOnTheirOwnServer(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	n := testenv.StartNATS(t)
	nc := n.Conn(t)
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	topo := Topology{}.WithDefaults()
	require.NoError(t, Provision(ctx, js, topo, nil))

	name, err := requestsServer(ctx, js, topo)
	require.NoError(t, err)
	require.Equal(t, n.Server.Name(), name, "standalone, R1, connected to")
	other, err := jetstream.NewWithDomain(nc, "hub")
	require.NoError(t, err)
	name, err = requestsServer(ctx, other, topo)
	require.NoError(t, err)
	require.Empty(t, name, "another domain's JetStream")
	name, err = requestsServer(ctx, js, Topology{RequestsStream: "NONE"}.WithDefaults())
	require.NoError(t, err)
	require.Empty(t, name, "no such stream")

	r := stageRuntimeLedger(t, false)
	r.js, r.topo = js, topo
	d := &transport.Delivery{Stream: topo.RequestsStream, Sequence: 7, Delivered: 1, Connection: 1}
	require.True(t, r.retriesSafe(d))
	require.False(t, r.retriesSafe(&transport.Delivery{Connection: 0}), "a reconnect between its pull and its receipt")
	r.retried.note(d, time.Second, stageNow)

	before := n.Server.Name()
	n.Restart(t)
	// Connected again: right after the restart the client may not have
	// noticed the old connection's end yet.
	require.Eventually(t, func() bool { return nc.IsConnected() && nc.Stats().Reconnects == 1 }, 10*time.Second, 10*time.Millisecond)
	next := &transport.Delivery{Stream: topo.RequestsStream, Sequence: 7, Delivered: 2, Connection: 2}
	require.False(t, r.retried.take(next, stageNow), "remembered before the server restarted")
	require.False(t, r.retriesSafe(d), "a delivery of the connection before the restart")
	require.NotEqual(t, before, n.Server.Name(), "a server without a configured name gets a new one at each start")
	require.True(t, r.retriesSafe(next), "where the stream is stored is read again after the reconnect")

	n.Stop()
	require.Eventually(t, func() bool { return !nc.IsConnected() }, 10*time.Second, 10*time.Millisecond)
	var s storeSite
	require.False(t, s.here(js, topo, 0, stageNow), "unreadable: not remembered")
	require.False(t, s.known)
	require.Equal(t, stageNow.Add(siteRetry), s.retryAt, "read again only after a pause")
}

// The quarantine record read of a redelivery runs beside the terminal
// record's, on a goroutine of its own: a panic there is raised again on
// the delivery's goroutine, whose recovery releases the message, and does
// not end the process.
func TestQuarantineReadPanicIsTheDeliverys(t *testing.T) {
	t.Parallel()
	js, topo, _ := outcomesEnv(t)
	r := stageRuntime(t, nil, nil)
	r.js, r.topo, r.outcomes = js, topo, NewOutcomes(js, topo)
	r.dlq = nil // its read panics (a nil writer)
	st := stageState(r, 2)
	_, done := r.decode(requestMsg(t, nil, nil), st)
	require.False(t, done)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var p any
	func() {
		defer func() { p = recover() }()
		r.endedEarlier(ctx, st)
	}()
	require.NotNil(t, p, "the read's panic is raised on the delivery's goroutine")
	require.Contains(t, p, "quarantine record read")
}
