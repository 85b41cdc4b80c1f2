package retry

import (
	"fmt"
	"time"

	"github.com/personaq/personaq/schemas"
)

// DefaultPlateauAttempts is how many failed attempts must stop at the same
// tasks_completed for a plateau: "identical across 2+ attempts" (adaptive
// retry). With a fallback agent, both agents must be among them.
const DefaultPlateauAttempts = 2

// PlateauConfirmAttempt is the first attempt that may confirm a plateau.
// Adaptive retry's decision table continues at attempt 3 even when the
// plateau is already visible ("continue to attempt 4, confirm with the
// other agent") and defers from attempt 4 on. A policy with fewer attempts
// confirms on its last one.
const PlateauConfirmAttempt = 4

// Input is everything Decide looks at.
type Input struct {
	Policy Policy
	// HasFallback enables primary/fallback alternation and makes plateau
	// confirmation require both agents.
	HasFallback bool
	// History holds the earlier counted attempts of this task step, oldest
	// first; it does not include Current.
	History []Attempt
	// Current is the attempt that just ended.
	Current Attempt
	// ProgressTotal is the request's progress_total (tasks_total). When
	// positive the request tracks progress, and a failed attempt that
	// reported none (a session that died early, a timeout, a network
	// failure) counts as 0/ProgressTotal: zero progress on every attempt
	// escalates instead of ending exhausted.
	ProgressTotal int
	// PlateauAttempts overrides DefaultPlateauAttempts when positive.
	PlateauAttempts int
}

// attempts returns History and Current as one new slice, oldest first,
// with unreported progress filled in when the request tracks it.
func (in Input) attempts() []Attempt {
	all := make([]Attempt, 0, len(in.History)+1)
	all = append(append(all, in.History...), in.Current)
	if in.ProgressTotal <= 0 {
		return all
	}
	for i := range all {
		if all[i].Class.Failed() && !all[i].Progress.Known() {
			all[i].Progress = Progress{Completed: 0, Total: in.ProgressTotal}
		}
	}
	return all
}

// Decide returns what happens after in.Current. It is pure: same input, same
// decision (jittered schedules draw from their own injected source).
func Decide(in Input) Decision {
	p := in.Policy.WithDefaults()
	if d, done := settled(p, in); done {
		return d
	}
	all := in.attempts()
	if pl, ok := plateau(p, in, all); ok {
		d := stop(ActionDefer, schemas.ReasonDeferred, fmt.Sprintf(
			"plateau at %d/%d confirmed across %s on attempt %d; deferring (complexity limit)",
			pl.Completed, pl.Total, agentsPhrase(in.HasFallback), in.Current.Number))
		d.Plateau = &pl
		return d
	}
	if in.Current.Number >= p.MaxAttempts {
		return exhausted(p, in, all)
	}
	if d, over := overBudget(p, in, all); over {
		return d
	}
	return retryNext(p, in, all)
}

// settled decides the classes whose outcome needs no history: success,
// invalid message, snooze, terminal, and a non-retryable error type.
func settled(p Policy, in Input) (Decision, bool) {
	cur := in.Current
	switch cur.Class {
	case ClassSucceeded:
		return Decision{Action: ActionAck, Counted: true}, true
	case ClassInvalidMessage:
		return blocked(ActionQuarantine, schemas.ReasonInvalidMessage, "message could not be decoded: "+cur.Error), true
	case ClassSnooze:
		return snooze(p, in), true
	case ClassTerminal:
		return blocked(ActionQuarantine, schemas.ReasonTerminal, "terminal error; task blocked: "+cur.Error), true
	}
	if t, ok := p.nonRetryableMatch(cur.ErrorTypes); ok {
		return blocked(ActionQuarantine, schemas.ReasonTerminal, fmt.Sprintf(
			"non-retryable error type %s under policy %q; task blocked: %s", t, p.Name, cur.Error)), true
	}
	return Decision{}, false
}

func stop(a Action, reason schemas.Reason, detail string) Decision {
	return Decision{Action: a, Reason: reason, Detail: detail, Counted: true}
}

// blocked is a stop after which the task cannot go on without a person.
func blocked(a Action, reason schemas.Reason, detail string) Decision {
	d := stop(a, reason, detail)
	d.Blocked = true
	return d
}

func snooze(p Policy, in Input) Decision {
	cur := in.Current
	return Decision{
		Action:           ActionRetry,
		Delay:            clampDelay(cur.RetryAfter),
		NextAttempt:      cur.Number,
		Role:             RoleFor(cur.Number, in.HasFallback),
		Timeout:          p.AttemptTimeout,
		ProgressInterval: p.ProgressInterval,
		RemainingRetries: max(p.MaxAttempts-cur.Number+1, 0),
		Detail:           "snoozed; attempt not counted",
	}
}

func retryNext(p Policy, in Input, all []Attempt) Decision {
	cur := in.Current
	next := cur.Number + 1
	delay, warning := delayAfter(p, cur)
	d := Decision{
		Action:           ActionRetry,
		Delay:            delay,
		Warning:          warning,
		NextAttempt:      next,
		Role:             RoleFor(next, in.HasFallback),
		Timeout:          p.AttemptTimeout,
		ProgressInterval: p.ProgressInterval,
		Feedback:         FeedbackFor(all),
		RemainingRetries: p.MaxAttempts - cur.Number,
		Counted:          true,
		Detail:           fmt.Sprintf("%s failure on attempt %d of %d", cur.Class, cur.Number, p.MaxAttempts),
	}
	if d.ProgressInterval = ProgressIntervalFor(p, append(in.History[:len(in.History):len(in.History)], cur)); d.ProgressInterval != p.ProgressInterval {
		d.Detail += "; progress improved, the next attempt reports progress half as often"
	}
	if next == p.MaxAttempts && progressVaried(p, all) {
		d.Timeout = scaleDuration(p.AttemptTimeout, p.ExtendedTimeoutFactor)
		d.Detail += "; progress varied, last attempt gets an extended timeout"
	}
	return d
}

// delayAfter is the wait before the retry that follows cur, and a warning
// when the policy's schedule returned an out-of-range delay (safeDelay).
func delayAfter(p Policy, cur Attempt) (time.Duration, string) {
	if cur.RetryAfter > 0 {
		return clampDelay(cur.RetryAfter), ""
	}
	switch cur.Class {
	case ClassNetwork:
		return p.NetworkDelay, ""
	case ClassValidation:
		return p.ValidationDelay, ""
	}
	d, ok := safeDelay(p.Schedule, cur.Number)
	if !ok {
		return d, fmt.Sprintf("schedule %s returned an out-of-range delay for retry %d; used %s", p.Schedule, cur.Number, d)
	}
	return d, ""
}

// exhausted ends a step whose last attempt failed: the task is blocked, or,
// when the request tracked progress, escalated to a person.
func exhausted(p Policy, in Input, all []Attempt) Decision {
	last := fmt.Sprintf("last: %s: %s", in.Current.Class, in.Current.Error)
	switch {
	case !anyProgress(all):
		return blocked(ActionQuarantine, schemas.ReasonExhausted, fmt.Sprintf(
			"all %d attempts failed; task blocked; %s", p.MaxAttempts, last))
	case zeroProgress(all):
		return stop(ActionEscalate, schemas.ReasonEscalated, fmt.Sprintf(
			"zero progress on all %d attempts (likely API/connection issue); escalated; %s", p.MaxAttempts, last))
	}
	return stop(ActionEscalate, schemas.ReasonEscalated, fmt.Sprintf(
		"all %d attempts exhausted with %s; escalated; %s", p.MaxAttempts, progressStory(all), last))
}

func agentsPhrase(hasFallback bool) string {
	if hasFallback {
		return "both agents"
	}
	return "attempts"
}
