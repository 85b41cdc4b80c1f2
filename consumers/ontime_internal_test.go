package consumers

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/personaq/personaq/consumers/ledger"
	"github.com/personaq/personaq/retry"
)

// failedAt is attempt n, failed retryable after running 100 ms, ended at end.
func failedAt(n int, end time.Time) retry.Attempt {
	return retry.Attempt{Number: n, Class: retry.ClassRetryable, Error: "boom",
		At: end.Add(-100 * time.Millisecond), Duration: 100 * time.Millisecond}
}

// The due time of a retry is read back from the history: the failed
// attempt's end plus the delay Decide gives it, when Decide retries and
// the delay can be recomputed.
func TestDueAt(t *testing.T) {
	t.Parallel()
	end := stageNow
	linear := stagePolicy() // linear step 1s, 3 attempts
	jittered := stagePolicy()
	jittered.Schedule = retry.Exponential{Initial: time.Second, Coefficient: 2, Jitter: 0.5}
	withRetryAfter := failedAt(1, end)
	withRetryAfter.RetryAfter = 5 * time.Second
	lost := failedAt(1, end)
	lost.Error = ledger.LostAttemptError
	terminal := failedAt(1, end)
	terminal.Class = retry.ClassTerminal
	for _, c := range []struct {
		name    string
		policy  retry.Policy
		history []retry.Attempt
		due     time.Time
		ok      bool
	}{
		{"first attempt", linear, nil, time.Time{}, false},
		{"retry 1 of a linear schedule", linear, []retry.Attempt{failedAt(1, end)}, end.Add(time.Second), true},
		{"retry 2 of a linear schedule", linear, []retry.Attempt{failedAt(1, end.Add(-5*time.Second)), failedAt(2, end)}, end.Add(2 * time.Second), true},
		{"a provider's Retry-After", linear, []retry.Attempt{withRetryAfter}, end.Add(5 * time.Second), true},
		{"a jittered schedule", jittered, []retry.Attempt{failedAt(1, end)}, time.Time{}, false},
		{"a jittered schedule under Retry-After", jittered, []retry.Attempt{withRetryAfter}, end.Add(5 * time.Second), true},
		{"a lost attempt", linear, []retry.Attempt{lost}, time.Time{}, false},
		{"a terminal failure", linear, []retry.Attempt{terminal}, time.Time{}, false},
		{"the last attempt failed", linear, []retry.Attempt{failedAt(1, end), failedAt(2, end), failedAt(3, end)}, time.Time{}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			due, ok := dueAt(c.policy, false, c.history)
			require.Equal(t, c.ok, ok)
			require.Equal(t, c.due, due)
		})
	}
}

func TestStartWait(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name string
		in   time.Duration // due − now
		want time.Duration
	}{
		{"due already", -time.Second, 0},
		{"due now", 0, 0},
		{"due in 12ms", 12 * time.Millisecond, 12 * time.Millisecond},
		{"due far off (another replica's clock)", time.Minute, 120 * time.Millisecond},
	} {
		require.Equal(t, c.want, startWait(stageNow.Add(c.in), stageNow, 120*time.Millisecond), c.name)
	}
}

// A retry's message is asked back early only with a ledger, and only when
// the next delivery reads back the same due time from the attempt's record.
func TestRetryLead(t *testing.T) {
	t.Parallel()
	jittered := stagePolicy()
	jittered.Schedule = retry.Exponential{Initial: time.Second, Coefficient: 2, Jitter: 0.5}
	for _, c := range []struct {
		name   string
		ledger bool
		policy retry.Policy
		ended  time.Duration // before now
		left   time.Duration
		want   time.Duration
	}{
		{"no ledger", false, stagePolicy(), 0, time.Second, 0},
		{"recorded at once", true, stagePolicy(), 0, time.Second, retryLeadMax},
		{"recording took 40ms", true, stagePolicy(), 40 * time.Millisecond, 960 * time.Millisecond, retryLeadMax},
		{"little left: a quarter of it", true, stagePolicy(), 960 * time.Millisecond, 40 * time.Millisecond, 10 * time.Millisecond},
		{"nothing left", true, stagePolicy(), 2 * time.Second, 0, 0},
		{"a delay the record does not tell", true, stagePolicy(), 0, 700 * time.Millisecond, 0},
		{"a jittered delay", true, jittered, 0, 1200 * time.Millisecond, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			r := stageRuntimeLedger(t, c.ledger)
			r.leadMax = retryLeadMax
			st := stageState(r, 1)
			p := c.policy
			st.policy, st.attempt = &p, failedAt(1, stageNow.Add(-c.ended))
			require.Equal(t, c.want, r.retryLead(st, c.left))
		})
	}
}
