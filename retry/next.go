package retry

import (
	"fmt"
	"time"
)

// ImprovedProgressIntervalFactor multiplies Policy.ProgressInterval for the
// attempt after one that completed more than its predecessor: adaptive
// retry's "retry with 2x poll interval" when progress improved. A session
// that is making headway is asked to report half as often.
const ImprovedProgressIntervalFactor = 2.0

// TimeoutFor returns the timeout of attempt n given the earlier attempts:
// the policy's AttemptTimeout, extended by ExtendedTimeoutFactor for the
// last attempt when progress has varied (adaptive retry). It is the same
// rule Decide applies when it schedules that attempt, recomputed on
// redelivery.
func TimeoutFor(p Policy, history []Attempt, n int) time.Duration {
	p = p.WithDefaults()
	if n != p.MaxAttempts || len(history) == 0 {
		return p.AttemptTimeout
	}
	if progressVaried(p, history) {
		return scaleDuration(p.AttemptTimeout, p.ExtendedTimeoutFactor)
	}
	return p.AttemptTimeout
}

// ProgressIntervalFor returns how often the attempt after history is asked
// to report progress: the policy's ProgressInterval, doubled when the last
// attempt of history completed more than the one before it. It is the rule
// Decide applies (Decision.ProgressInterval), recomputed on redelivery.
func ProgressIntervalFor(p Policy, history []Attempt) time.Duration {
	p = p.WithDefaults()
	if improved(history) {
		return scaleDuration(p.ProgressInterval, ImprovedProgressIntervalFactor)
	}
	return p.ProgressInterval
}

// FeedbackFor lists the errors of the failed attempts in history, oldest
// first, for the next attempt's prompt (retry with feedback).
func FeedbackFor(history []Attempt) []string {
	var out []string
	for _, a := range history {
		if !a.Class.Failed() {
			continue
		}
		msg := a.Feedback
		if msg == "" {
			msg = a.Error
		}
		out = append(out, fmt.Sprintf("attempt %d (%s): %s", a.Number, a.Class, msg))
	}
	return out
}
