package flow

import (
	"fmt"
	"sync"
	"time"
)

// Circuit breaker defaults.
const (
	DefaultCircuitFailures = 5
	DefaultCircuitCoolDown = 30 * time.Second
)

// Circuit configures one persona's circuit breaker. The zero value is
// off.
type Circuit struct {
	// Failures: consecutive provider failures (network errors, 5xx other
	// than 529) on one replica that open the circuit. 0: no breaker.
	Failures int
	// CoolDown: how long an open circuit keeps the persona paused before
	// one probe is let through. Default: 30s.
	CoolDown time.Duration
}

// On reports whether the breaker is configured.
func (c Circuit) On() bool { return c.Failures > 0 }

// WithDefaults fills CoolDown.
func (c Circuit) WithDefaults() Circuit {
	if c.On() && c.CoolDown == 0 {
		c.CoolDown = DefaultCircuitCoolDown
	}
	return c
}

// Validate reports a negative field.
func (c Circuit) Validate() error {
	if c.Failures < 0 || c.CoolDown < 0 {
		return fmt.Errorf("%w: circuit: failures and cool_down must not be negative", ErrInvalidConfig)
	}
	return nil
}

// State is a circuit's state.
type State uint8

// Circuit states.
const (
	// Closed: requests flow.
	Closed State = iota
	// Open: the persona is paused until the cool-down ends.
	Open
	// HalfOpen: one replica's single probe decides: success closes the
	// circuit, failure opens it again.
	HalfOpen
)

func (s State) String() string {
	switch s {
	case Open:
		return "open"
	case HalfOpen:
		return "half-open"
	}
	return "closed"
}

func parseState(s string) State {
	switch s {
	case "open":
		return Open
	case "half":
		return HalfOpen
	}
	return Closed
}

// Breaker counts one replica's consecutive provider failures of one
// persona. It is safe for concurrent use.
type Breaker struct {
	threshold int
	mu        sync.Mutex
	run       int
}

// NewBreaker returns a breaker that trips at threshold consecutive
// failures.
func NewBreaker(threshold int) *Breaker { return &Breaker{threshold: threshold} }

// Record counts one attempt's outcome: a provider failure extends the run,
// anything else (success, a 4xx, a validation failure) ends it. trip is
// true when this failure reached the threshold (the run restarts then);
// run is the run's length including it.
func (b *Breaker) Record(failed bool) (trip bool, run int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !failed {
		b.run = 0
		return false, 0
	}
	b.run++
	run = b.run
	if b.threshold > 0 && b.run >= b.threshold {
		b.run = 0
		return true, run
	}
	return false, run
}

// Status is a circuit as the shared store has it, in the replica's time.
type Status struct {
	State State
	// Until is when an open circuit's cool-down ends.
	Until time.Time
	// Failures that opened it (plus failed probes since).
	Failures int
	// Prober holds the half-open probe ("" when none).
	Prober string
	// ProbeUntil is when the prober's claim lapses.
	ProbeUntil time.Time
}

// PullMode is what a replica may pull for a persona.
type PullMode uint8

// Pull modes.
const (
	// PullAll: the circuit is closed.
	PullAll PullMode = iota
	// PullNone: open (cooling down) or another replica probes; wait.
	PullNone
	// PullAskProbe: the cool-down is over; ask the store for the probe.
	PullAskProbe
	// PullProbe: this replica holds the probe: one request at a time.
	PullProbe
)

// Pull says what replica self may pull now, and for PullNone how long to
// wait before looking again (at most poll).
func (s Status) Pull(self string, now time.Time, poll time.Duration) (PullMode, time.Duration) {
	switch s.State {
	case Open:
		if left := s.Until.Sub(now); left > 0 {
			return PullNone, min(left, poll)
		}
		return PullAskProbe, 0
	case HalfOpen:
		if s.Prober == self {
			return PullProbe, 0
		}
		if left := s.ProbeUntil.Sub(now); left > 0 {
			return PullNone, min(left, poll)
		}
		return PullAskProbe, 0
	}
	return PullAll, 0
}
