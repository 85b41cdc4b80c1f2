package ledger_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/personaq/personaq/consumers/ledger"
	"github.com/personaq/personaq/retry"
)

// epochFloorSuite checks that Begin WithEpochFloor numbers attempts as a
// call to Epoch followed by Begin WithFloor(delivered) did (the floor
// applying when the message is older than the epoch and was delivered
// before), and returns the epoch, in one call.
func epochFloorSuite(t *testing.T, b backend) {
	t.Run("EpochFloor", func(t *testing.T) {
		t.Parallel()
		epoch := time.UnixMilli(1_700_000_000_000)
		before, after := epoch.Add(-time.Millisecond), epoch.Add(time.Millisecond)
		tests := []struct {
			name      string
			published time.Time
			delivered int
			floor     int  // WithFloor too, when set
			recorded  bool // the step has one counted attempt already
			done      bool // the step succeeded already
			want      int
		}{
			{name: "OlderRedelivery", published: before, delivered: 3, want: 3},
			{name: "YoungerRedelivery", published: after, delivered: 3, want: 1},
			{name: "PublishedAtTheEpoch", published: epoch, delivered: 3, want: 1},
			{name: "FirstDelivery", published: before, delivered: 1, want: 1},
			{name: "HigherFloorWins", published: before, delivered: 3, floor: 5, want: 5},
			{name: "LowerFloorLoses", published: before, delivered: 4, floor: 2, want: 4},
			{name: "NotFresh", published: before, delivered: 3, recorded: true, want: 2},
			{name: "Done", published: before, delivered: 3, done: true},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				t.Parallel()
				clock := &fixedClock{now: epoch}
				s := newSetup(t, b, func(c *ledger.Config) { c.Now = clock.Now })
				e, err := s.l.Epoch(s.ctx)
				require.NoError(t, err)
				require.Equal(t, epoch, e)
				clock.Advance(time.Minute)
				if tt.recorded || tt.done {
					bg := s.begin(t, step, "req")
					a := failed(bg.Attempt, retry.ClassRetryable, "x")
					if tt.done {
						a = retry.Attempt{Number: bg.Attempt, Class: retry.ClassSucceeded}
					}
					s.finish(t, step, a, ledger.FinishOptions{Counted: true, Succeeded: tt.done, RequestID: "req"})
				}
				opts := []ledger.BeginOption{ledger.WithEpochFloor(tt.published, tt.delivered)}
				if tt.floor > 0 {
					opts = append(opts, ledger.WithFloor(tt.floor))
				}
				bg, err := s.l.Begin(s.ctx, step, "req", opts...)
				require.NoError(t, err)
				require.Equal(t, tt.done, bg.Done)
				require.Equal(t, tt.want, bg.Attempt)
				require.True(t, epoch.Equal(bg.Epoch), "Begun.Epoch %v, want %v", bg.Epoch, epoch)
			})
		}
	})
	t.Run("EpochFloorAfterTheDataIsLost", func(t *testing.T) {
		// The marker is gone (FLUSHALL): Begin makes a new one, now, and a
		// redelivered message published before now takes the floor.
		t.Parallel()
		clock := &fixedClock{now: time.UnixMilli(1_700_000_000_000)}
		s := newSetup(t, b, func(c *ledger.Config) { c.Now = clock.Now })
		_, err := s.l.Epoch(s.ctx)
		require.NoError(t, err)
		published := clock.Now().Add(time.Second)
		clock.Advance(time.Minute)
		require.NoError(t, s.client.Del(s.ctx, s.cfg.Prefix+":epoch").Err())
		bg, err := s.l.Begin(s.ctx, step, "req", ledger.WithEpochFloor(published, 2))
		require.NoError(t, err)
		require.True(t, clock.Now().Equal(bg.Epoch))
		require.Equal(t, 2, bg.Attempt)
		e, err := s.l.Epoch(s.ctx)
		require.NoError(t, err)
		require.True(t, bg.Epoch.Equal(e), "Epoch reads the marker Begin made")
	})
	t.Run("NoEpochWithoutTheOption", func(t *testing.T) {
		t.Parallel()
		s := newSetup(t, b, nil)
		bg := s.begin(t, step, "req")
		require.True(t, bg.Epoch.IsZero())
	})
}
