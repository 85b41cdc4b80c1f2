package consumers

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"

	"github.com/personaq/personaq/consumers/wire"
	"github.com/personaq/personaq/integration/testenv"
	"github.com/personaq/personaq/schemas"
)

// The watch stays bounded: past its bound it forgets the oldest half of
// the cancels, and messages published before them must look their record
// up; later ones need not.
func TestCancelWatchForgetsOldestAndLooksThemUp(t *testing.T) {
	t.Parallel()
	w := newCancelWatch(nil, Topology{}.WithDefaults(), zerolog.Nop())
	w.horizon = time.Time{} // as after reading every stored cancel
	w.max = 10
	t0 := time.Date(2026, 11, 27, 0, 0, 0, 0, time.UTC)
	for i := range 11 {
		w.add(&schemas.OutcomeEvent{RequestID: fmt.Sprint("r", i), Outcome: schemas.OutcomeCancelled, At: t0.Add(time.Duration(i) * time.Minute)})
	}
	require.Len(t, w.records, 6)
	rec, lookup := w.known("r0", t0)
	require.Nil(t, rec)
	require.True(t, lookup, "a message as old as a forgotten cancel looks its record up")
	rec, lookup = w.known("r10", t0)
	require.NotNil(t, rec)
	require.False(t, lookup)
	_, lookup = w.known("new", t0.Add(time.Hour))
	require.False(t, lookup, "a message published after every forgotten cancel needs no lookup")
}

// A running attempt is cancelled with ErrCancelled when its request's
// cancel arrives, or at once when it arrived before.
func TestCancelWatchTrack(t *testing.T) {
	t.Parallel()
	w := newCancelWatch(nil, Topology{}.WithDefaults(), zerolog.Nop())
	ctx, cancel := context.WithCancelCause(context.Background())
	untrack := w.track("r1", cancel)
	require.NoError(t, ctx.Err())
	w.add(&schemas.OutcomeEvent{RequestID: "r1", Outcome: schemas.OutcomeCancelled})
	require.Equal(t, ErrCancelled, context.Cause(ctx))
	untrack()
	require.Empty(t, w.running)
	ctx2, cancel2 := context.WithCancelCause(context.Background())
	defer w.track("r1", cancel2)()
	require.Equal(t, ErrCancelled, context.Cause(ctx2))
}

// After a reconnect the watch reads the cancels stored while it could not
// hear them: catchUp from a time reads the cancelled records stored since.
func TestCancelWatchCatchesUpAfterAReconnect(t *testing.T) {
	t.Parallel()
	n := testenv.StartNATS(t)
	js := n.JetStream(t)
	topo := Topology{}.WithDefaults()
	require.NoError(t, Provision(context.Background(), js, topo, nil))
	before := wire.Cancellation{RequestID: "before", Persona: "p"}
	_, err := wire.Cancel(context.Background(), js, topo, before)
	require.NoError(t, err)
	time.Sleep(50 * time.Millisecond)
	from := time.Now()
	_, err = wire.Cancel(context.Background(), js, topo, wire.Cancellation{RequestID: "missed", Persona: "p"})
	require.NoError(t, err)
	w := newCancelWatch(js, topo, zerolog.Nop())
	w.catchUp(context.Background(), from)
	require.NotNil(t, w.cancelled("missed"), "a cancel stored since the drop is read")
	require.Nil(t, w.cancelled("before"), "only what was stored since is read again")
	w.catchUp(context.Background(), time.Time{})
	require.NotNil(t, w.cancelled("before"))
	require.True(t, w.horizon.IsZero(), "every stored cancel read: no message needs a lookup")
}

// Two attempts of one request tracked at once (a redelivery while the
// first still runs here) are both stopped by its cancel, whichever of them
// was untracked in between; the last untrack leaves nothing behind.
func TestCancelWatchTrackTwoAttempts(t *testing.T) {
	t.Parallel()
	for _, first := range []bool{true, false} {
		w := newCancelWatch(nil, Topology{}.WithDefaults(), zerolog.Nop())
		ctxs := make([]context.Context, 3)
		untracks := make([]func(), 3)
		for i := range ctxs {
			var cancel context.CancelCauseFunc
			ctxs[i], cancel = context.WithCancelCause(context.Background())
			untracks[i] = w.track("r1", cancel)
		}
		gone := 1 // the middle one
		if first {
			gone = 0
		}
		untracks[gone]()
		untracks[gone]() // a second untrack changes nothing
		w.add(&schemas.OutcomeEvent{RequestID: "r1", Outcome: schemas.OutcomeCancelled})
		for i, ctx := range ctxs {
			if i == gone {
				require.NoError(t, ctx.Err(), "attempt %d was untracked before the cancel", i)
			} else {
				require.Equal(t, ErrCancelled, context.Cause(ctx), "attempt %d", i)
			}
		}
		for i, u := range untracks {
			if i != gone {
				u()
			}
		}
		require.Empty(t, w.running)
	}
}
