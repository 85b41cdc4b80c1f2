package retry

import (
	"fmt"
	"time"
)

// DefaultPlateauAttempts is how many failed attempts must stop at the same
// progress point before a plateau is confirmed. Seed 004's table defers at
// attempt 4 when attempts 1, 3 and 4 stopped at 5/9 (both agents), but keeps
// going at attempt 2 or 3 with only two matches, so three it is.
const DefaultPlateauAttempts = 3

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
	// PlateauAttempts overrides DefaultPlateauAttempts when positive.
	PlateauAttempts int
}

// Decide returns what happens after in.Current. It is pure: same input, same
// decision (jittered schedules draw from their own injected source).
func Decide(in Input) Decision {
	p := in.Policy.WithDefaults()
	if d, done := settled(p, in); done {
		return d
	}
	if pl, ok := plateau(p, in); ok {
		d := stop(ActionDefer, ReasonDeferred, fmt.Sprintf(
			"plateau at %d/%d confirmed across %s; deferring", pl.Completed, pl.Total, agentsPhrase(in.HasFallback)))
		d.Plateau = &pl
		return d
	}
	if in.Current.Number >= p.MaxAttempts {
		return exhausted(p, in)
	}
	return retryNext(p, in)
}

// settled decides the classes whose outcome needs no history: success,
// invalid message, snooze, terminal, and a non-retryable error type.
func settled(p Policy, in Input) (Decision, bool) {
	cur := in.Current
	switch cur.Class {
	case ClassSucceeded:
		return Decision{Action: ActionAck, Counted: true}, true
	case ClassInvalidMessage:
		return stop(ActionQuarantine, ReasonInvalidMessage, "message could not be decoded: "+cur.Error), true
	case ClassSnooze:
		return snooze(p, in), true
	case ClassTerminal:
		return stop(ActionQuarantine, ReasonTerminal, "terminal error: "+cur.Error), true
	}
	if t, ok := p.nonRetryableMatch(cur.ErrorTypes); ok {
		return stop(ActionQuarantine, ReasonTerminal, fmt.Sprintf(
			"non-retryable error type %s under policy %q: %s", t, p.Name, cur.Error)), true
	}
	return Decision{}, false
}

func stop(a Action, reason, detail string) Decision {
	return Decision{Action: a, Reason: reason, Detail: detail, Counted: true}
}

func snooze(p Policy, in Input) Decision {
	cur := in.Current
	return Decision{
		Action:           ActionRetry,
		Delay:            clampDelay(cur.RetryAfter),
		NextAttempt:      cur.Number,
		Role:             RoleFor(cur.Number, in.HasFallback),
		Timeout:          p.AttemptTimeout,
		RemainingRetries: max(p.MaxAttempts-cur.Number+1, 0),
		Detail:           "snoozed; attempt not counted",
	}
}

func retryNext(p Policy, in Input) Decision {
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
		Feedback:         feedback(in),
		RemainingRetries: p.MaxAttempts - cur.Number,
		Counted:          true,
		Detail:           fmt.Sprintf("%s failure on attempt %d of %d", cur.Class, cur.Number, p.MaxAttempts),
	}
	if next == p.MaxAttempts && progressVaried(p, in) {
		d.Timeout = scaleDuration(p.AttemptTimeout, p.ExtendedTimeoutFactor)
		d.Detail += "; progress varied, last attempt gets an extended timeout"
	}
	return d
}

// delayAfter is the wait before the retry that follows cur, and a warning
// when the policy's schedule returned an out-of-range delay (SafeDelay).
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
	d, ok := SafeDelay(p.Schedule, cur.Number)
	if !ok {
		return d, fmt.Sprintf("schedule %s returned an out-of-range delay for retry %d; used %s", p.Schedule, cur.Number, d)
	}
	return d, ""
}

// feedback lists the error of every failed attempt so far, oldest first,
// preferring a validation failure's feedback text (seed 002).
func feedback(in Input) []string {
	return FeedbackFor(append(in.History[:len(in.History):len(in.History)], in.Current))
}

func exhausted(p Policy, in Input) Decision {
	all := append(in.History[:len(in.History):len(in.History)], in.Current)
	if !anyProgress(all) {
		return stop(ActionQuarantine, ReasonExhausted, fmt.Sprintf(
			"all %d attempts failed; last: %s: %s", p.MaxAttempts, in.Current.Class, in.Current.Error))
	}
	if zeroProgress(all) {
		return stop(ActionEscalate, ReasonEscalated, fmt.Sprintf(
			"zero progress on all %d attempts (likely API/connection issue); last: %s", p.MaxAttempts, in.Current.Error))
	}
	return stop(ActionEscalate, ReasonEscalated, fmt.Sprintf(
		"variable but incomplete progress; all %d attempts exhausted; last: %s", p.MaxAttempts, in.Current.Error))
}

func agentsPhrase(hasFallback bool) string {
	if hasFallback {
		return "both agents"
	}
	return "attempts"
}
