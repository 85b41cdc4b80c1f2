package retry

import "time"

// DefaultBudgetBuffer is the step budget's slack on top of attempts and backoff.
const DefaultBudgetBuffer = 30 * time.Second

// Budget is the step budget's deadline arithmetic for one policy: how long the
// runtime must keep a request alive so every retry can run.
//
// StepDeadline assumes every retry waits its schedule delay. Network
// failures wait NetworkDelay instead and validation failures
// ValidationDelay, and the last attempt may run with an extended timeout
// (adaptive retry); the WorstCase fields bound those too. Neither bounds a
// failure's own Retry-After or a snooze, which the caller asked for.
type Budget struct {
	Policy         string
	Persona        string
	AttemptTimeout time.Duration
	MaxRetries     int
	// Backoffs[i] is the wait before retry i+1: the schedule's largest
	// possible delay, so a jittered schedule still yields an upper bound.
	Backoffs     []time.Duration
	TotalBackoff time.Duration
	Buffer       time.Duration
	// StepDeadline = (MaxRetries+1)×AttemptTimeout + TotalBackoff + Buffer.
	StepDeadline time.Duration
	NetworkDelay time.Duration
	// WorstCaseBackoff is Σ max(Backoffs[i], NetworkDelay, ValidationDelay).
	WorstCaseBackoff time.Duration
	// WorstCaseDeadline is StepDeadline with WorstCaseBackoff and the last
	// attempt's timeout scaled by ExtendedTimeoutFactor.
	WorstCaseDeadline time.Duration
}

// NewBudget computes p's budget. p should be valid (Policy.Validate); the
// arithmetic saturates rather than overflowing either way.
func NewBudget(p Policy) Budget {
	p = p.WithDefaults()
	b := Budget{
		Policy:         p.Name,
		Persona:        p.Persona,
		AttemptTimeout: p.AttemptTimeout,
		MaxRetries:     p.MaxRetries(),
		Buffer:         DefaultBudgetBuffer,
		NetworkDelay:   p.NetworkDelay,
	}
	b.Backoffs = upperBackoffs(p.Schedule, b.MaxRetries)
	b.TotalBackoff, b.WorstCaseBackoff = sumBackoffs(b.Backoffs, max(p.NetworkDelay, p.ValidationDelay))
	b.StepDeadline = sumDurations(mulDuration(p.AttemptTimeout, b.MaxRetries+1), b.TotalBackoff, b.Buffer)
	b.WorstCaseDeadline = sumDurations(worstAttempts(p), b.WorstCaseBackoff, b.Buffer)
	return b
}

// upperBackoffs is the largest delay before each of n retries.
func upperBackoffs(s Schedule, n int) []time.Duration {
	out := make([]time.Duration, n)
	for i := range out {
		_, out[i], _ = DelayRange(s, i+1)
	}
	return out
}

// sumBackoffs returns Σ backoffs and Σ max(backoff, floor).
func sumBackoffs(backoffs []time.Duration, floor time.Duration) (total, worst time.Duration) {
	for _, d := range backoffs {
		total = addDuration(total, d)
		worst = addDuration(worst, max(d, floor))
	}
	return total, worst
}

// worstAttempts is the time all attempts may run: Decide extends only the
// last attempt's timeout, and only when there is a retry before it.
func worstAttempts(p Policy) time.Duration {
	if p.MaxRetries() == 0 {
		return p.AttemptTimeout
	}
	extended := scaleDuration(p.AttemptTimeout, max(p.ExtendedTimeoutFactor, 1))
	return addDuration(mulDuration(p.AttemptTimeout, p.MaxRetries()), extended)
}

func sumDurations(ds ...time.Duration) time.Duration {
	var total time.Duration
	for _, d := range ds {
		total = addDuration(total, max(d, 0))
	}
	return total
}
