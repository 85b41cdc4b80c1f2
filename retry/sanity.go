package retry

import (
	"fmt"
	"time"
)

// DefaultBackoffStep is the step of the default schedule, Linear{30s}
// (the step budget's 30s, 60s, 90s …).
const DefaultBackoffStep = 30 * time.Second

// DefaultSchedule is the schedule a policy without one uses.
func DefaultSchedule() Schedule { return Linear{Step: DefaultBackoffStep} }

// RangedSchedule is implemented by schedules whose delays are random
// (jitter). DelayRange returns the smallest and largest value Delay(n) can
// return, so budgets can use a true upper bound and explanations stay
// deterministic. Custom jittered schedules should implement it too.
type RangedSchedule interface {
	Schedule
	DelayRange(n int) (lo, hi time.Duration)
}

// safeDelay returns s.Delay(n) when it is in range. A custom schedule that
// returns a negative delay gets the default schedule's delay instead, and one
// past the package cap (24h) gets the cap; ok is false in both cases so the
// runtime can warn about the policy. A nil schedule means the default and is
// not reported.
func safeDelay(s Schedule, n int) (d time.Duration, ok bool) {
	if s == nil {
		return DefaultSchedule().Delay(n), true
	}
	return sanitize(s.Delay(n), n)
}

// DelayRange returns the bounds of s.Delay(n): the schedule's own for a
// RangedSchedule, otherwise Delay(n) twice. Both go through safeDelay's
// checks; ok is false when either bound was out of range.
func DelayRange(s Schedule, n int) (lo, hi time.Duration, ok bool) {
	r, isRanged := s.(RangedSchedule)
	if !isRanged {
		d, ok := safeDelay(s, n)
		return d, d, ok
	}
	rlo, rhi := r.DelayRange(n)
	lo, okLo := sanitize(rlo, n)
	hi, okHi := sanitize(rhi, n)
	return lo, hi, okLo && okHi
}

func sanitize(d time.Duration, n int) (time.Duration, bool) {
	switch {
	case d < 0:
		return DefaultSchedule().Delay(n), false
	case d > maxDelay:
		return maxDelay, false
	}
	return d, true
}

// scheduleValidator is implemented by schedules that can check their own
// fields; Policy.Validate calls it. Custom schedules may implement it.
type scheduleValidator interface{ Validate() error }

// Validate reports a negative step.
func (l Linear) Validate() error {
	if l.Step < 0 {
		return fieldErr("schedule.step", "must not be negative, got %s", l.Step)
	}
	return nil
}

// Validate reports a negative delay.
func (f Fixed) Validate() error {
	if f.Every < 0 {
		return fieldErr("schedule.every", "must not be negative, got %s", f.Every)
	}
	return nil
}

// Validate reports the first negative entry.
func (l List) Validate() error {
	for i, d := range l.Delays {
		if d < 0 {
			return fieldErr(fmt.Sprintf("schedule.delays[%d]", i), "must not be negative, got %s", d)
		}
	}
	return nil
}

// Validate follows Temporal's rules: coefficient at least 1 (0 means the
// default 2), maximum not below initial, jitter a fraction in [0,1].
func (e Exponential) Validate() error {
	switch {
	case e.Initial < 0:
		return fieldErr("schedule.initial", "must not be negative, got %s", e.Initial)
	case e.Coefficient != 0 && !(e.Coefficient >= 1):
		return fieldErr("schedule.coefficient", "must be at least 1 (or 0 for 2), got %g", e.Coefficient)
	case e.Maximum < 0 || (e.Maximum > 0 && e.Maximum < e.Initial):
		return fieldErr("schedule.maximum", "must be 0 or at least initial %s, got %s", e.Initial, e.Maximum)
	case !(e.Jitter >= 0 && e.Jitter <= 1):
		return fieldErr("schedule.jitter", "must be in [0,1], got %g", e.Jitter)
	}
	return nil
}
