package consumers

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/personaq/personaq/consumers/transport"
)

// A delivery's Begin calls share one key; a later delivery of the same
// message never has it, not even under the same delivery count, which a
// nats-server restarted on its store after a kill -9 can hand out again.
// With the count alone, such a redelivery took over an attempt that had
// run and was still settling, and ran it again (a fault-suite run: a
// persona allowed 2 attempts ran 3 times).
func TestBeginKeyIsOneDeliverysOwn(t *testing.T) {
	t.Parallel()
	r := &Runtime{beginKeys: newBeginKeys()}
	at := time.Now()
	first := &transport.Delivery{Sequence: 7, Delivered: 2, Received: at}
	require.Equal(t, r.beginKey(first), r.beginKey(first), "a delivery asking again keeps its key")
	again := &transport.Delivery{Sequence: 7, Delivered: 2, Received: at.Add(3 * time.Second)}
	require.NotEqual(t, r.beginKey(first), r.beginKey(again), "the same delivery count, received again")
	next := &transport.Delivery{Sequence: 7, Delivered: 3, Received: at}
	require.NotEqual(t, r.beginKey(first), r.beginKey(next))
	other := &Runtime{beginKeys: newBeginKeys()}
	require.NotEqual(t, r.beginKey(first), other.beginKey(first), "another replica")
}
