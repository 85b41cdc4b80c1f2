package retry

import (
	"fmt"
	"time"
)

// TimeoutFor returns the timeout of attempt n given the earlier attempts:
// the policy's AttemptTimeout, extended by ExtendedTimeoutFactor for the
// last attempt when progress has varied (seed 004). It is the same rule
// Decide applies when it schedules that attempt, recomputed on redelivery.
func TimeoutFor(p Policy, history []Attempt, n int) time.Duration {
	p = p.WithDefaults()
	if n != p.MaxAttempts || len(history) == 0 {
		return p.AttemptTimeout
	}
	in := Input{Policy: p, History: history[:len(history)-1], Current: history[len(history)-1]}
	if progressVaried(p, in) {
		return scaleDuration(p.AttemptTimeout, p.ExtendedTimeoutFactor)
	}
	return p.AttemptTimeout
}

// FeedbackFor lists the errors of the failed attempts in history, oldest
// first, for the next attempt's prompt (seed 002).
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
