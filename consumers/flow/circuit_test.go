package flow_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/personaq/personaq/consumers/flow"
)

func TestBreakerTripsOnAFailureRateOverTheWindow(t *testing.T) {
	t.Parallel()
	c := flow.Circuit{Failures: 3, MinCalls: 4, FailureRate: 0.5, Window: 10 * time.Second}
	f, ok := true, false
	cases := []struct {
		name     string
		outcomes []bool // true: provider failure, one every 100 ms
		trips    []int  // indexes that trip
	}{
		{"NotBeforeMinCalls", []bool{f, f, f}, nil},
		{"AtMinCallsAndRate", []bool{f, f, f, f}, []int{3}},
		{"SuccessesKeepTheRateLow", []bool{f, ok, ok, f, ok, ok, f, ok, ok}, nil},
		{"RateReachedDespiteSuccesses", []bool{f, ok, f, ok, f}, []int{4}},
		{"RestartsAfterTrip", []bool{f, f, f, f, f, f, f, f}, []int{3, 7}},
		{"NeverWithoutFailures", []bool{ok, ok, ok, ok, ok}, nil},
		{"ASuccessNeverTrips", []bool{f, f, f, ok}, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := flow.NewBreaker(c)
			now := time.Unix(1_800_000_000, 0)
			var trips []int
			for i, failed := range tc.outcomes {
				if trip, _ := b.Record(failed, now.Add(time.Duration(i)*100*time.Millisecond)); trip {
					trips = append(trips, i)
				}
			}
			require.Equal(t, tc.trips, trips)
		})
	}
}

// Failures older than the window no longer count.
func TestBreakerForgetsFailuresOutsideTheWindow(t *testing.T) {
	t.Parallel()
	b := flow.NewBreaker(flow.Circuit{Failures: 3, MinCalls: 3, FailureRate: 1, Window: 5 * time.Second})
	now := time.Unix(1_800_000_000, 0)
	for i := range 2 {
		trip, _ := b.Record(true, now.Add(time.Duration(i)*time.Second))
		require.False(t, trip)
	}
	trip, n := b.Record(true, now.Add(7*time.Second))
	require.False(t, trip, "the first two failures left the window")
	require.Equal(t, 1, n)
}

func TestStatusPull(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	poll := 500 * time.Millisecond
	cases := []struct {
		name string
		st   flow.Status
		mode flow.PullMode
		wait time.Duration
	}{
		{"Closed", flow.Status{}, flow.PullAll, 0},
		{"OpenCooling", flow.Status{State: flow.Open, Until: now.Add(10 * time.Second)}, flow.PullNone, poll},
		{"OpenAlmostOver", flow.Status{State: flow.Open, Until: now.Add(100 * time.Millisecond)}, flow.PullNone, 100 * time.Millisecond},
		{"OpenOver", flow.Status{State: flow.Open, Until: now.Add(-time.Millisecond)}, flow.PullAskProbe, 0},
		{"HalfOpenMine", flow.Status{State: flow.HalfOpen, Prober: "me", ProbeUntil: now.Add(time.Minute)}, flow.PullProbe, 0},
		{"HalfOpenOthers", flow.Status{State: flow.HalfOpen, Prober: "other", ProbeUntil: now.Add(time.Minute)}, flow.PullNone, poll},
		{"HalfOpenOthersLapsed", flow.Status{State: flow.HalfOpen, Prober: "other", ProbeUntil: now.Add(-time.Second)}, flow.PullAskProbe, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			mode, wait := tc.st.Pull("me", now, poll)
			require.Equal(t, tc.mode, mode)
			require.Equal(t, tc.wait, wait)
		})
	}
}

func TestLimitDefaultsAndValidation(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name    string
		limit   flow.Limit
		want    flow.Limit
		invalid string
	}{
		{"Requests", flow.Limit{RequestsPerMinute: 600}, flow.Limit{RequestsPerMinute: 600, Burst: 10, CoolDown: time.Second}, ""},
		{"SlowRequests", flow.Limit{RequestsPerMinute: 30}, flow.Limit{RequestsPerMinute: 30, Burst: 1, CoolDown: time.Second}, ""},
		{"Tokens", flow.Limit{TokensPerMinute: 120000}, flow.Limit{TokensPerMinute: 120000, EstimatedTokens: 1000, TokenBurst: 2000, CoolDown: time.Second}, ""},
		{"TokensSmall", flow.Limit{TokensPerMinute: 6000, EstimatedTokens: 500}, flow.Limit{TokensPerMinute: 6000, EstimatedTokens: 500, TokenBurst: 500, CoolDown: time.Second}, ""},
		{"Nothing", flow.Limit{}, flow.Limit{CoolDown: time.Second}, "set at least one"},
		{"EstimateOverLimit", flow.Limit{TokensPerMinute: 100, EstimatedTokens: 200}, flow.Limit{TokensPerMinute: 100, EstimatedTokens: 200, TokenBurst: 200, CoolDown: time.Second}, "estimated_tokens"},
		{"Negative", flow.Limit{RequestsPerMinute: -1}, flow.Limit{RequestsPerMinute: -1, CoolDown: time.Second}, "negative"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got := tc.limit.WithDefaults()
			require.Equal(t, tc.want, got)
			err := got.Validate()
			if tc.invalid == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, flow.ErrInvalidConfig)
			require.ErrorContains(t, err, tc.invalid)
		})
	}
}
