package retry_test

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/personaq/personaq/retry"
)

// constRand is an injected jitter source that always returns v.
func constRand(v float64) func() float64 { return func() float64 { return v } }

func TestScheduleDelay(t *testing.T) {
	t.Parallel()
	temporal := retry.Exponential{Initial: time.Second, Coefficient: 2, Maximum: 100 * time.Second}
	tests := []struct {
		name     string
		schedule retry.Schedule
		n        []int
		want     []time.Duration
	}{
		{"Linear30s", retry.Linear{Step: 30 * time.Second}, []int{1, 2, 3},
			[]time.Duration{30 * time.Second, 60 * time.Second, 90 * time.Second}},
		{"LinearBelowOneIsFirst", retry.Linear{Step: 30 * time.Second}, []int{0, -5}, []time.Duration{30 * time.Second, 30 * time.Second}},
		{"LinearNegativeStepIsZero", retry.Linear{Step: -time.Second}, []int{1, 3}, []time.Duration{0, 0}},
		{"FixedEveryRetry", retry.Fixed{Every: 5 * time.Second}, []int{1, 2, 50}, []time.Duration{5 * time.Second, 5 * time.Second, 5 * time.Second}},
		{"FixedClamped", retry.Fixed{Every: -time.Second}, []int{1}, []time.Duration{0}},
		{"ListRepeatsLast", retry.List{Delays: []time.Duration{time.Second, 2 * time.Second, 5 * time.Second}},
			[]int{1, 2, 3, 4, 10}, []time.Duration{time.Second, 2 * time.Second, 5 * time.Second, 5 * time.Second, 5 * time.Second}},
		{"ListEmptyIsZero", retry.List{}, []int{1, 2}, []time.Duration{0, 0}},
		{"ExponentialGrowsThenCaps", temporal, []int{1, 2, 3, 7, 8, 9},
			[]time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 64 * time.Second, 100 * time.Second, 100 * time.Second}},
		{"ExponentialDefaultCoefficientIsTwo", retry.Exponential{Initial: time.Second}, []int{1, 2, 3},
			[]time.Duration{time.Second, 2 * time.Second, 4 * time.Second}},
		{"ExponentialDefaultMaximumIs100xInitial", retry.Exponential{Initial: time.Second, Coefficient: 10}, []int{2, 3, 4},
			[]time.Duration{10 * time.Second, 100 * time.Second, 100 * time.Second}},
		{"ExponentialCoefficientOneIsConstant", retry.Exponential{Initial: 3 * time.Second, Coefficient: 1}, []int{1, 9},
			[]time.Duration{3 * time.Second, 3 * time.Second}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := make([]time.Duration, len(tt.n))
			for i, n := range tt.n {
				got[i] = tt.schedule.Delay(n)
			}
			require.Equal(t, tt.want, got)
		})
	}
}

func TestExponentialJitter(t *testing.T) {
	t.Parallel()
	base := retry.Exponential{Initial: time.Second, Coefficient: 2, Maximum: 100 * time.Second, Jitter: 0.2}
	tests := []struct {
		name string
		rand float64
		n    int
		want time.Duration
	}{
		{"LowestDraw", 0, 1, 800 * time.Millisecond},
		{"MiddleDraw", 0.5, 1, time.Second},
		{"HighDraw", 0.75, 3, 4400 * time.Millisecond},
		{"CapIsHardAboveMaximum", 0.99, 10, 100 * time.Second},
		{"CapStillJittersDown", 0, 10, 80 * time.Second},
		{"BadSourceAboveOneClamped", 50, 2, 2400 * time.Millisecond},
		{"BadSourceNegativeClamped", -50, 2, 1600 * time.Millisecond},
		{"BadSourceNaNClamped", math.NaN(), 2, 1600 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := base
			e.Rand = constRand(tt.rand)
			require.Equal(t, tt.want, e.Delay(tt.n))
		})
	}
}

func TestExponentialJitterStaysInRange(t *testing.T) {
	t.Parallel()
	e := retry.TemporalExponential()
	for n := 1; n <= 12; n++ {
		lo, hi := e.DelayRange(n)
		for _, r := range []float64{0, 0.1, 0.5, 0.9, math.Nextafter(1, 0)} {
			e.Rand = constRand(r)
			d := e.Delay(n)
			require.GreaterOrEqual(t, d, lo, "n=%d r=%g", n, r)
			require.LessOrEqual(t, d, hi, "n=%d r=%g", n, r)
		}
	}
}

func TestScheduleOverflowCap(t *testing.T) {
	t.Parallel()
	const day = 24 * time.Hour
	tests := []struct {
		name     string
		schedule retry.Schedule
		n        int
		want     time.Duration
	}{
		{"LinearHugeN", retry.Linear{Step: time.Hour}, math.MaxInt, day},
		{"LinearHugeStep", retry.Linear{Step: time.Duration(math.MaxInt64)}, 2, day},
		{"ExponentialHugeN", retry.Exponential{Initial: time.Second, Coefficient: 2, Maximum: 1000 * time.Hour}, math.MaxInt, day},
		{"ExponentialHugeCoefficient", retry.Exponential{Initial: time.Second, Coefficient: 1e300, Maximum: 1000 * time.Hour}, 5, day},
		{"ExponentialZeroInitialHugeN", retry.Exponential{Initial: 0, Coefficient: 2}, math.MaxInt, 0},
		{"ExponentialJitterAtCap", retry.Exponential{Initial: time.Hour, Coefficient: 2, Maximum: 1000 * time.Hour,
			Jitter: 1, Rand: constRand(0.99)}, 1000, day},
		{"FixedHuge", retry.Fixed{Every: 48 * time.Hour}, 1, day},
		{"ListHuge", retry.List{Delays: []time.Duration{48 * time.Hour}}, 1, day},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tt.want, tt.schedule.Delay(tt.n))
		})
	}
}

func TestScheduleString(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		schedule retry.Schedule
		want     string
	}{
		{"Linear", retry.Linear{Step: 30 * time.Second}, "linear step=30s"},
		{"Fixed", retry.Fixed{Every: time.Second}, "fixed every=1s"},
		{"List", retry.List{Delays: []time.Duration{time.Second, time.Minute}}, "list 1s,1m0s"},
		{"ExponentialShowsEffectiveDefaults", retry.Exponential{Initial: time.Second},
			"exponential initial=1s coefficient=2 maximum=1m40s jitter=0"},
		{"Temporal", retry.TemporalExponential(), "exponential initial=1s coefficient=2 maximum=1m40s jitter=0.2"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tt.want, tt.schedule.String())
		})
	}
}
