package consumers

import (
	"context"
	"slices"
	"time"

	"github.com/personaq/personaq/consumers/ledger"
	"github.com/personaq/personaq/retry"
)

// A retry starts when it is due, not when its redelivery, the lookups a
// redelivery makes and the ledger's Begin are over: with a ledger, its
// message is asked back a little early (retryLead), and the delivery that
// comes back waits out the rest once Begin numbered it (startOnTime). The
// due time is read from the ledger's record of the attempt that failed, so
// whichever replica the message comes back to holds it until then; under
// a burst of retries due at once, the ledger's scripts run one after
// another on Redis's one thread, and the lead keeps that queue off the
// retries' start.

const (
	// retryLeadMax is the most a retry's message is asked back early: time
	// for a burst of a few hundred Begins at Redis's pace.
	retryLeadMax = 30 * time.Millisecond
	// startWaitFactor bounds how long a delivery waits for its due time,
	// the clocks of two replicas apart: never much past the lead.
	startWaitFactor = 4
	// dueSlack is how far the due time read back from the ledger may
	// differ from the one the retry was given: the record keeps the
	// attempt's start and duration in whole milliseconds, so it reads back
	// up to 2 ms early, never late.
	dueSlack = 2 * time.Millisecond
)

// retryLead is how much earlier than due (left from now) the retry of
// st's attempt asks its message back: none without a ledger, or when the
// due time the next delivery reads back (dueAt over the history with this
// attempt last) is not this one, such as a jittered delay, which cannot
// be recomputed. A quarter of the delay at most.
func (r *Runtime) retryLead(st *attemptState, left time.Duration) time.Duration {
	if r.ledger == nil || r.leadMax <= 0 || left <= 0 {
		return 0
	}
	due, ok := dueAt(*st.policy, st.hasFallback(), append(slices.Clip(st.history), st.attempt))
	if want := r.now().Add(left); !ok || due.Sub(want).Abs() > dueSlack {
		return 0
	}
	return min(r.leadMax, left/4)
}

// startOnTime holds a retry that came back before its due time until it
// is due (at most startWaitFactor leads, or until ctx ends), then reports
// how late it starts. The due time read back can be dueSlack early, so
// the wait runs that much past it: never early, at most 2 ms late.
func (r *Runtime) startOnTime(ctx context.Context, st *attemptState) {
	due, ok := dueAt(*st.policy, st.hasFallback(), st.history)
	if !ok {
		return
	}
	if wait := startWait(due.Add(dueSlack), r.now(), startWaitFactor*r.leadMax); wait > 0 {
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-ctx.Done():
		}
		t.Stop()
	}
	r.obs.RedeliveryLateness(st.persona.name, r.now().Sub(due))
}

// startWait is how long a delivery at now waits for due: never negative,
// never more than most.
func startWait(due, now time.Time, most time.Duration) time.Duration {
	return min(max(due.Sub(now), 0), most)
}

// dueAt is when the retry of history's last attempt is due: its end plus
// the delay Decide gives it; ok is false when there is none to tell (no
// attempt yet, a lost one, one that ended the request, a jittered delay).
func dueAt(p retry.Policy, hasFallback bool, history []retry.Attempt) (time.Time, bool) {
	if len(history) == 0 {
		return time.Time{}, false
	}
	last := history[len(history)-1]
	if last.At.IsZero() || last.Error == ledger.LostAttemptError {
		return time.Time{}, false
	}
	if lo, hi, _ := retry.DelayRange(p.WithDefaults().Schedule, last.Number); lo != hi && last.RetryAfter == 0 {
		return time.Time{}, false // a jittered delay cannot be recomputed
	}
	d := retry.Decide(retry.Input{Policy: p, HasFallback: hasFallback, History: history[:len(history)-1], Current: last})
	if d.Action != retry.ActionRetry {
		return time.Time{}, false
	}
	return last.At.Add(last.Duration).Add(d.Delay), true
}
