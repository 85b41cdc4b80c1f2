package retry_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/personaq/personaq/retry"
	"github.com/personaq/personaq/schemas"
)

// Adaptive retry: the decision table, walked row by row with a
// fallback agent, the adaptive preset (five attempts, linear 30s) and nine
// sub-tasks. Odd attempts run the primary agent, even ones the fallback.
//
// Readings chosen where the decision table and its prose disagree (the table wins over the
// prose):
//   - "Plateau" is the prose's "tasks_completed identical across 2+
//     attempts"; with a fallback agent both agents must be among those
//     attempts ("plateau detection applies ACROSS agents").
//   - Row 3 continues to attempt 4 even when the plateau is already
//     visible on both agents (5, 5, 5): a plateau is confirmed no earlier
//     than attempt 4, the table's first DEFER row (retry.PlateauConfirmAttempt).
//   - Row 4 "plateau confirmed across agents" is the current attempt
//     matching an earlier one with both agents among the matches: 3, 4, 5, 5
//     defers at attempt 4 (attempts 3 and 4, primary and fallback, at 5/9).
//   - Row 2a's "2x poll interval" is Decision.ProgressInterval: how often
//     the next attempt is asked to report progress, doubled after an
//     attempt that completed more than the one before it.
//   - Row 5's "zero progress all attempts" counts an attempt that reported
//     nothing as 0/tasks_total when the request tracks progress
//     (progress_total set): sessions that died early, timeouts, network
//     failures are the "likely API/connection issue".
func TestAdaptiveRetry_DecisionTable(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		total int // the request's progress_total; 0: only reported progress counts
		steps []step
	}{
		{"Row1_FailureSwitchesToFallback", 9, []step{
			{at(1, failed, 5), retryTo(2, fallback, s30, tmo, 4)},
		}},
		{"Row2a_ProgressImproved_SwitchBackWith2xPollInterval", 9, []step{
			{at(1, failed, 4), retryTo(2, fallback, s30, tmo, 4)},
			{at(2, failed, 5), poll2x(retryTo(3, primary, s60, tmo, 3))},
		}},
		{"Row2b_ProgressBelowAttempt1_SwitchBack", 9, []step{
			{at(1, failed, 5), retryTo(2, fallback, s30, tmo, 4)},
			{at(2, failed, 4), retryTo(3, primary, s60, tmo, 3)},
		}},
		{"Row2b_SamePlateauPoint_SwitchBackAndAnalyze", 9, []step{
			{at(1, failed, 5), retryTo(2, fallback, s30, tmo, 4)},
			{at(2, failed, 5), retryTo(3, primary, s60, tmo, 3)},
		}},
		{"Row3_PlateauAtSameTask_ContinuesToAttempt4", 9, []step{
			{at(1, failed, 5), retryTo(2, fallback, s30, tmo, 4)},
			{at(2, failed, 5), retryTo(3, primary, s60, tmo, 3)},
			{at(3, failed, 5), retryTo(4, fallback, s90, tmo, 2)}, // 5/9 on both agents: still confirm at 4
		}},
		{"Row4_PlateauConfirmedAcrossAgents_Defer", 9, []step{
			{at(1, failed, 3), retryTo(2, fallback, s30, tmo, 4)},
			{at(2, failed, 4), poll2x(retryTo(3, primary, s60, tmo, 3))},
			{at(3, failed, 5), poll2x(retryTo(4, fallback, s90, tmo, 2))},
			{at(4, failed, 5), deferAt(5)}, // attempts 3 (primary) and 4 (fallback) at 5/9
		}},
		{"Row4_PlateauOnEveryAttempt_Defer", 9, []step{
			{at(1, failed, 5), retryTo(2, fallback, s30, tmo, 4)},
			{at(2, failed, 5), retryTo(3, primary, s60, tmo, 3)},
			{at(3, failed, 5), retryTo(4, fallback, s90, tmo, 2)},
			{at(4, failed, 5), deferAt(5)},
		}},
		{"Row4_VariableProgress_OneMoreRetryWithExtendedTimeout", 9, []step{
			{at(1, failed, 5), retryTo(2, fallback, s30, tmo, 4)},
			{at(2, failed, 4), retryTo(3, primary, s60, tmo, 3)},
			{at(3, failed, 5), poll2x(retryTo(4, fallback, s90, tmo, 2))},
			{at(4, failed, 6), poll2x(retryTo(5, primary, s120, 2*tmo, 1))},
		}},
		{"Row5_PlateauConfirmed_Defer", 9, []step{
			{at(1, failed, 2), retryTo(2, fallback, s30, tmo, 4)},
			{at(2, failed, 3), poll2x(retryTo(3, primary, s60, tmo, 3))},
			{at(3, failed, 4), poll2x(retryTo(4, fallback, s90, tmo, 2))},
			{at(4, failed, 5), poll2x(retryTo(5, primary, s120, 2*tmo, 1))},
			{at(5, failed, 5), deferAt(5)}, // DEFERRED, not escalated
		}},
		{"Row5_ZeroProgressAllAttempts_Escalate", 9, []step{
			{at(1, failed, 0), retryTo(2, fallback, s30, tmo, 4)},
			{at(2, failed, 0), retryTo(3, primary, s60, tmo, 3)},
			{at(3, failed, 0), retryTo(4, fallback, s90, tmo, 2)},
			{at(4, failed, 0), retryTo(5, primary, s120, tmo, 1)},
			{at(5, failed, 0), final(retry.ActionEscalate, schemas.ReasonEscalated)},
		}},
		{"Row5_ZeroProgressIncludingAttemptsThatReportedNothing_Escalate", 9, []step{
			{at(1, retry.ClassTimeout, -1), retryTo(2, fallback, s30, tmo, 4)},
			{at(2, retry.ClassNetwork, -1), retryTo(3, primary, s60, tmo, 3)},
			{at(3, failed, 0), retryTo(4, fallback, s90, tmo, 2)},
			{at(4, failed, -1), retryTo(5, primary, s120, tmo, 1)},
			{at(5, retry.ClassTimeout, -1), final(retry.ActionEscalate, schemas.ReasonEscalated)},
		}},
		{"Row5_VariableButIncomplete_Escalate", 9, []step{
			{at(1, failed, 2), retryTo(2, fallback, s30, tmo, 4)},
			{at(2, failed, 4), poll2x(retryTo(3, primary, s60, tmo, 3))},
			{at(3, failed, 3), retryTo(4, fallback, s90, tmo, 2)},
			{at(4, failed, 6), poll2x(retryTo(5, primary, s120, 2*tmo, 1))},
			{at(5, failed, 7), final(retry.ActionEscalate, schemas.ReasonEscalated)},
		}},
		// Progress not tracked (no progress_total, nothing reported): the
		// step budget's exhaustion, task blocked.
		{"NoProgressTracked_Exhausted", 0, []step{
			{at(1, failed, -1), retryTo(2, fallback, s30, tmo, 4)},
			{at(2, failed, -1), retryTo(3, primary, s60, tmo, 3)},
			{at(3, failed, -1), retryTo(4, fallback, s90, tmo, 2)},
			{at(4, failed, -1), retryTo(5, primary, s120, tmo, 1)},
			{at(5, failed, -1), final(retry.ActionQuarantine, schemas.ReasonExhausted)},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			walk(t, retry.Input{Policy: retry.AdaptivePolicy(), HasFallback: true, ProgressTotal: tt.total}, tt.steps)
		})
	}
}

// The escalations' details say what actually happened (issue #15: no
// "variable but incomplete progress" when progress never changed).
func TestAdaptiveRetry_EscalationDetailSaysWhatHappened(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		progress []int
		classes  []retry.Class
		want     string
	}{
		{"ZeroProgress", []int{0, -1, 0, -1, 0}, nil,
			"zero progress on all 5 attempts (likely API/connection issue); escalated"},
		{"Variable", []int{2, 4, 3, 6, 7}, nil,
			"all 5 attempts exhausted with variable but incomplete progress (2/9, 4/9, 3/9, 6/9, 7/9); escalated"},
		// Network failures never count toward a plateau, so 5/9 on every
		// attempt is no plateau here; progress still never changed.
		{"UnchangedButNoPlateau", []int{5, 5, 5, 5, 5},
			[]retry.Class{failed, retry.ClassNetwork, failed, retry.ClassNetwork, failed},
			"all 5 attempts exhausted with progress stayed at 5/9 on every attempt that reported it, but no plateau was confirmed; escalated"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var all []retry.Attempt
			for i, done := range tt.progress {
				c := failed
				if tt.classes != nil {
					c = tt.classes[i]
				}
				all = append(all, at(i+1, c, done))
			}
			d := retry.Decide(retry.Input{Policy: retry.AdaptivePolicy(), HasFallback: true, ProgressTotal: 9,
				History: all[:4], Current: all[4]})
			require.Equal(t, retry.ActionEscalate, d.Action)
			require.False(t, d.Blocked, "escalated, not blocked")
			require.Contains(t, d.Detail, tt.want)
		})
	}
}

// The "Progress Tracking" example: 5/9 primary, 4/9 fallback, 5/9 primary
// ("same as attempt 1"), 5/9 fallback ("plateau detected"), 5/9 primary
// ("confirmed plateau"). Reading: the table's row 4 already defers at
// attempt 4 (5/9 on both agents), so the example's attempt 5 is never run;
// the DEFER line names the plateau point.
func TestAdaptiveRetry_ProgressTrackingExample(t *testing.T) {
	t.Parallel()
	in := retry.Input{Policy: retry.AdaptivePolicy(), HasFallback: true, ProgressTotal: 9}
	walk(t, in, []step{
		{at(1, failed, 5), retryTo(2, fallback, s30, tmo, 4)},
		{at(2, failed, 4), retryTo(3, primary, s60, tmo, 3)},
		{at(3, failed, 5), poll2x(retryTo(4, fallback, s90, tmo, 2))}, // same as attempt 1: continue
		{at(4, failed, 5), deferAt(5)},                                // plateau across agents: DEFER
	})
	in.History = []retry.Attempt{at(1, failed, 5), at(2, failed, 4), at(3, failed, 5)}
	in.Current = at(4, failed, 5)
	d := retry.Decide(in)
	require.False(t, d.Blocked, "a deferred task is parked, not blocked")
	require.Equal(t, "Task story-7 step dev-story deferred - dev-story hit complexity limit at 5/9",
		retry.Message(in.Current, d, "story-7", "dev-story", "dev-story"))
}

// "Integration with crash recovery": primary crashes, fallback fails at
// task 5, primary fails at task 5 → plateau across agents → DEFER, one
// attempt counter across every failure type. Reading: the third line
// happens at attempt 3, which the table continues (row 3); the fallback's
// attempt 4 at task 5 confirms it.
func TestAdaptiveRetry_CrashRecoveryWithAgentFallback(t *testing.T) {
	t.Parallel()
	walk(t, retry.Input{Policy: retry.AdaptivePolicy(), HasFallback: true, ProgressTotal: 9}, []step{
		{at(1, retry.ClassTimeout, -1), retryTo(2, fallback, s30, tmo, 4)}, // the session died
		{at(2, failed, 5), retryTo(3, primary, s60, tmo, 3)},
		{at(3, failed, 5), retryTo(4, fallback, s90, tmo, 2)},
		{at(4, failed, 5), deferAt(5)},
	})
}

// "Network error handling": sleep 60 seconds, never count toward plateau
// detection, always retry up to max attempts.
func TestAdaptiveRetry_NetworkErrorHandling(t *testing.T) {
	t.Parallel()
	network := retry.ClassNetwork
	countNetwork := retry.AdaptivePolicy()
	countNetwork.NetworkCountsTowardPlateau = true
	tests := []struct {
		name   string
		policy retry.Policy
		total  int
		steps  []step
	}{
		{"Waits60sAndNeverConfirmsPlateau", retry.AdaptivePolicy(), 9, []step{
			{at(1, failed, 5), retryTo(2, fallback, s30, tmo, 4)},
			{at(2, network, 5), retryTo(3, primary, s60, tmo, 3)},
			{at(3, failed, 5), retryTo(4, fallback, s90, tmo, 2)},
			{at(4, network, 5), retryTo(5, primary, s60, tmo, 1)}, // the fallback's 5/9 was a network failure
			{at(5, failed, 5), final(retry.ActionEscalate, schemas.ReasonEscalated)},
		}},
		{"OptInCountsNetwork", countNetwork, 9, []step{
			{at(1, failed, 5), retryTo(2, fallback, s30, tmo, 4)},
			{at(2, network, 5), retryTo(3, primary, s60, tmo, 3)},
			{at(3, failed, 5), retryTo(4, fallback, s90, tmo, 2)},
			{at(4, network, 5), deferAt(5)},
		}},
		{"CurrentNetworkFailureIsNotAPlateau", retry.AdaptivePolicy(), 9, []step{
			{at(1, failed, 5), retryTo(2, fallback, s30, tmo, 4)},
			{at(2, failed, 5), retryTo(3, primary, s60, tmo, 3)},
			{at(3, failed, 5), retryTo(4, fallback, s90, tmo, 2)},
			{at(4, network, 5), retryTo(5, primary, s60, tmo, 1)},
			{at(5, failed, 5), deferAt(5)},
		}},
		{"RetriedUpToMaxAttemptsWithoutProgress", retry.AdaptivePolicy(), 0, []step{
			{at(1, network, -1), retryTo(2, fallback, s60, tmo, 4)},
			{at(2, network, -1), retryTo(3, primary, s60, tmo, 3)},
			{at(3, network, -1), retryTo(4, fallback, s60, tmo, 2)},
			{at(4, network, -1), retryTo(5, primary, s60, tmo, 1)},
			{at(5, network, -1), final(retry.ActionQuarantine, schemas.ReasonExhausted)},
		}},
		{"AllNetworkWithProgressTrackedEscalates", retry.AdaptivePolicy(), 9, []step{
			{at(1, network, -1), retryTo(2, fallback, s60, tmo, 4)},
			{at(2, network, -1), retryTo(3, primary, s60, tmo, 3)},
			{at(3, network, -1), retryTo(4, fallback, s60, tmo, 2)},
			{at(4, network, -1), retryTo(5, primary, s60, tmo, 1)},
			{at(5, network, -1), final(retry.ActionEscalate, schemas.ReasonEscalated)},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			walk(t, retry.Input{Policy: tt.policy, HasFallback: true, ProgressTotal: tt.total}, tt.steps)
		})
	}
}

// Without a fallback agent every attempt is the primary's: a plateau is
// still "identical across 2+ attempts", confirmed from attempt 4 on.
func TestAdaptiveRetry_WithoutFallbackAgent(t *testing.T) {
	t.Parallel()
	walk(t, retry.Input{Policy: retry.AdaptivePolicy(), ProgressTotal: 9}, []step{
		{at(1, failed, 5), retryTo(2, primary, s30, tmo, 4)},
		{at(2, failed, 5), retryTo(3, primary, s60, tmo, 3)},
		{at(3, failed, 5), retryTo(4, primary, s90, tmo, 2)},
		{at(4, failed, 5), deferAt(5)},
	})
}

// A policy with fewer attempts than the table confirms a plateau on its
// last attempt instead of escalating it.
func TestAdaptiveRetry_ShortPolicyConfirmsOnLastAttempt(t *testing.T) {
	t.Parallel()
	p := retry.Policy{Name: "short", MaxAttempts: 3, AttemptTimeout: time.Minute}
	walk(t, retry.Input{Policy: p, HasFallback: true, ProgressTotal: 9}, []step{
		{at(1, failed, 5), retryTo(2, fallback, s30, time.Minute, 2)},
		{at(2, failed, 5), retryTo(3, primary, s60, time.Minute, 1)},
		{at(3, failed, 5), deferAt(5)},
	})
}

// poll2x is d with the doubled progress interval (row 2a).
func poll2x(d retry.Decision) retry.Decision {
	d.ProgressInterval = 2 * retry.DefaultProgressInterval
	return d
}
