package api

import (
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"

	"github.com/personaq/personaq/schemas"
)

func recordMsg(t *testing.T, id string) *nats.Msg {
	t.Helper()
	data, err := schemas.MarshalOutcome(&schemas.OutcomeEvent{SchemaVersion: 1, RequestID: id, TaskID: "t", Step: "s",
		Persona: "p", Outcome: schemas.OutcomeSucceeded, Attempts: 1, At: time.Now().UTC()})
	require.NoError(t, err)
	return &nats.Msg{Subject: "personaq.outcomes.succeeded.p." + id, Data: data}
}

// TestWaiterRegisteredJustAfterItsRecordGetsIt: the subscription can see a
// record before a lookup of the stream does; a waiter registering right
// after it still gets it (the race that held long-polls their whole wait).
func TestWaiterRegisteredJustAfterItsRecordGetsIt(t *testing.T) {
	t.Parallel()
	ws := newWaiters(zerolog.Nop())
	ws.deliver(recordMsg(t, "r-1"))
	w := ws.add("r-1")
	defer ws.remove(w)
	select {
	case rec := <-w.wake:
		require.NotNil(t, rec)
		require.Equal(t, "r-1", rec.RequestID)
	default:
		t.Fatal("the waiter was not given the record it registered after")
	}
	other := ws.add("r-2")
	defer ws.remove(other)
	require.Empty(t, other.wake)
}

func TestRecentRecordsBounded(t *testing.T) {
	t.Parallel()
	var r recentRecords
	t0 := time.Now()
	r.put("a", []byte("x"), t0)
	r.put("b", make([]byte, recentBytes), t0.Add(time.Second))
	require.Nil(t, r.get("a"), "dropped for the byte bound")
	require.NotNil(t, r.get("b"))
	r.put("c", []byte("y"), t0.Add(recentTTL+2*time.Second))
	require.Nil(t, r.get("b"), "dropped for age")
	require.Equal(t, []byte("y"), r.get("c"))
	require.Equal(t, 1, r.bytes)
}
