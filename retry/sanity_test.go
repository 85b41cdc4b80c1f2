package retry_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/personaq/personaq/retry"
)

// scheduleFunc is a custom schedule that returns whatever f says.
type scheduleFunc func(n int) time.Duration

func (f scheduleFunc) Delay(n int) time.Duration { return f(n) }
func (f scheduleFunc) String() string            { return "custom" }

func TestSafeDelay(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		schedule retry.Schedule
		n        int
		want     time.Duration
		wantOK   bool
	}{
		{"InRange", scheduleFunc(func(int) time.Duration { return 7 * time.Second }), 1, 7 * time.Second, true},
		{"ZeroIsFine", scheduleFunc(func(int) time.Duration { return 0 }), 1, 0, true},
		{"NegativeUsesDefault", scheduleFunc(func(int) time.Duration { return -time.Second }), 2, 60 * time.Second, false},
		{"PastCapIsCapped", scheduleFunc(func(int) time.Duration { return 48 * time.Hour }), 1, 24 * time.Hour, false},
		{"NilIsDefaultSilently", nil, 3, 90 * time.Second, true},
		{"BuiltIn", retry.Linear{Step: time.Second}, 4, 4 * time.Second, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, ok := retry.SafeDelay(tt.schedule, tt.n)
			require.Equal(t, tt.want, got)
			require.Equal(t, tt.wantOK, ok)
		})
	}
}

func TestDelayRange(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		schedule retry.Schedule
		n        int
		lo, hi   time.Duration
		wantOK   bool
	}{
		{"FixedScheduleHasOnePoint", retry.Linear{Step: 30 * time.Second}, 2, 60 * time.Second, 60 * time.Second, true},
		{"JitterBounds", retry.TemporalExponential(), 2, 1600 * time.Millisecond, 2400 * time.Millisecond, true},
		{"JitterBoundsAtCap", retry.TemporalExponential(), 9, 80 * time.Second, 100 * time.Second, true},
		{"JitterAboveOneIsOne", retry.Exponential{Initial: time.Second, Jitter: 3}, 1, 0, 2 * time.Second, true},
		{"NoJitter", retry.Exponential{Initial: time.Second}, 3, 4 * time.Second, 4 * time.Second, true},
		{"CustomNegative", scheduleFunc(func(int) time.Duration { return -1 }), 1, 30 * time.Second, 30 * time.Second, false},
		{"Nil", nil, 1, 30 * time.Second, 30 * time.Second, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			lo, hi, ok := retry.DelayRange(tt.schedule, tt.n)
			require.Equal(t, []time.Duration{tt.lo, tt.hi}, []time.Duration{lo, hi})
			require.Equal(t, tt.wantOK, ok)
		})
	}
}
