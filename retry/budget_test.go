package retry_test

import (
	"math"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"

	"github.com/personaq/personaq/retry"
)

func TestBudgetWorstCase(t *testing.T) {
	t.Parallel()
	b := retry.NewBudget(retry.NewPersonaDefaults().Policy("context"))
	want := retry.Budget{
		Policy: "persona", Persona: "context", AttemptTimeout: time.Minute, MaxRetries: 3,
		Backoffs:     []time.Duration{30 * time.Second, 60 * time.Second, 90 * time.Second},
		TotalBackoff: 3 * time.Minute, Buffer: 30 * time.Second, StepDeadline: 450 * time.Second,
		NetworkDelay: time.Minute,
		// max(30s,60s) + max(60s,60s) + max(90s,60s)
		WorstCaseBackoff: 210 * time.Second,
		// 3×1m + 2×1m (extended last attempt) + 210s + 30s
		WorstCaseDeadline: 540 * time.Second,
	}
	if diff := cmp.Diff(want, b); diff != "" {
		t.Fatalf("(-want +got):\n%s", diff)
	}
}

func TestBudgetEdges(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name                    string
		policy                  retry.Policy
		wantDeadline, wantWorst time.Duration
		wantBackoffs            []time.Duration
	}{
		{"NoRetries", retry.Policy{MaxAttempts: 1, AttemptTimeout: time.Minute},
			90 * time.Second, 90 * time.Second, []time.Duration{}},
		{"JitterUsesUpperBound", retry.LLMPolicy(),
			30*time.Minute + 3600*time.Millisecond + 30*time.Second,
			20*time.Minute + 20*time.Minute + 2*time.Minute + 30*time.Second,
			[]time.Duration{1200 * time.Millisecond, 2400 * time.Millisecond}},
		{"ValidationDelayCountsInWorstCase", retry.Policy{MaxAttempts: 2, AttemptTimeout: time.Minute,
			Schedule: retry.Fixed{Every: time.Second}, NetworkDelay: time.Second, ValidationDelay: 5 * time.Minute},
			2*time.Minute + time.Second + 30*time.Second, 3*time.Minute + 5*time.Minute + 30*time.Second,
			[]time.Duration{time.Second}},
		{"SaturatesInsteadOfOverflowing", retry.Policy{MaxAttempts: 3, AttemptTimeout: time.Duration(math.MaxInt64 / 2)},
			time.Duration(math.MaxInt64), time.Duration(math.MaxInt64), []time.Duration{30 * time.Second, 60 * time.Second}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b := retry.NewBudget(tt.policy)
			require.Equal(t, tt.wantBackoffs, b.Backoffs)
			require.Equal(t, tt.wantDeadline, b.StepDeadline)
			require.Equal(t, tt.wantWorst, b.WorstCaseDeadline)
		})
	}
}

// TestBudgetBoundsJitteredDelays samples the jittered schedule across its
// whole range: no delay Decide can pick exceeds the budget's backoff.
func TestBudgetBoundsJitteredDelays(t *testing.T) {
	t.Parallel()
	p := retry.LLMPolicy()
	p.MaxAttempts = 12
	b := retry.NewBudget(p)
	for i, limit := range b.Backoffs {
		for r := 0.0; r < 1; r += 0.01 {
			e := retry.TemporalExponential()
			e.Rand = constRand(r)
			require.LessOrEqual(t, e.Delay(i+1), limit, "retry %d r=%g", i+1, r)
		}
	}
}
