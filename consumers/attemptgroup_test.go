package consumers

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/personaq/personaq/handlers"
	"github.com/personaq/personaq/retry"
)

func closedNow(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

func TestAttemptGroup(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name       string
		running    int // added before close
		doneBefore int // of those, done before close
		idleAtOnce bool
	}{
		{"nothing ran", 0, 0, true},
		{"all done before the close", 3, 3, true},
		{"some still running", 3, 1, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var g attemptGroup
			for range c.running {
				require.True(t, g.add())
			}
			for range c.doneBefore {
				g.done()
			}
			idle := g.close()
			require.Equal(t, c.idleAtOnce, closedNow(idle))
			require.False(t, g.add(), "a closed group starts no handler")
			require.Equal(t, idle, g.close(), "closing again waits on the same channel")
			for range c.running - c.doneBefore {
				require.False(t, closedNow(idle))
				g.done()
			}
			require.True(t, closedNow(idle))
		})
	}
}

// A delivery whose stages before the handler outlive Run's wait is not
// run: it is released uncounted, as an attempt cut short by a shutdown.
func TestNotStartedAfterRunWaited(t *testing.T) {
	t.Parallel()
	called := false
	r := stageRuntime(t, handlers.Func(func(context.Context, *handlers.Request) (handlers.Result, error) {
		called = true
		return handlers.Result{}, nil
	}), nil)
	st := stageState(r, 1)
	_, done := r.decode(requestMsg(t, nil, nil), st)
	require.False(t, done)
	st.attempt.Number = 1
	a := &flight{ctx: context.Background(), st: st}
	a.actx, a.cancel = context.WithCancelCause(a.ctx)
	<-r.attempts.close()
	require.False(t, r.attempts.add())
	end := r.notStarted(a)
	require.False(t, called, "the handler ran")
	require.Equal(t, released(0), end)
	require.Equal(t, retry.ClassSnooze, st.attempt.Class, "released uncounted")
	require.Error(t, a.actx.Err(), "the attempt's context is ended")
}
