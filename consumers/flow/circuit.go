package flow

import (
	"fmt"
	"sync"
	"time"
)

// Circuit breaker defaults.
const (
	DefaultCircuitFailures    = 5
	DefaultCircuitMinCalls    = 10
	DefaultCircuitFailureRate = 0.5
	DefaultCircuitWindow      = 30 * time.Second
	DefaultCircuitCoolDown    = 30 * time.Second
)

// Circuit configures one persona's circuit breaker. The zero value is
// off.
//
// It opens on a failure rate, not on a run of consecutive failures: a
// flaky provider's burst of first attempts failing together (each then
// succeeding on its retry) is not an outage. Within the last Window, on
// one replica, at least MinCalls attempts were answered, at least
// Failures of them were provider failures (network errors, 5xx other than
// 529), and failures were at least FailureRate of them. A provider's
// answer that names a Retry-After is pacing, not failure, and is not
// counted at all (see the runtime).
type Circuit struct {
	// Failures: the fewest provider failures within Window that can open
	// the circuit. 0: no breaker.
	Failures int
	// MinCalls: the fewest attempts within Window before the rate counts.
	// Default: 10 (never fewer than Failures).
	MinCalls int
	// FailureRate: the share of the Window's attempts that must have
	// failed, in (0, 1]. Default: 0.5.
	FailureRate float64
	// Window: how far back attempts count. Default: 30s.
	Window time.Duration
	// CoolDown: how long an open circuit keeps the persona paused before
	// one probe is let through. Default: 30s.
	CoolDown time.Duration
}

// On reports whether the breaker is configured.
func (c Circuit) On() bool { return c.Failures > 0 }

// WithDefaults fills the unset fields of a breaker that is on.
func (c Circuit) WithDefaults() Circuit {
	if !c.On() {
		return c
	}
	if c.CoolDown == 0 {
		c.CoolDown = DefaultCircuitCoolDown
	}
	if c.MinCalls == 0 {
		c.MinCalls = DefaultCircuitMinCalls
	}
	c.MinCalls = max(c.MinCalls, c.Failures)
	if c.FailureRate == 0 {
		c.FailureRate = DefaultCircuitFailureRate
	}
	if c.Window == 0 {
		c.Window = DefaultCircuitWindow
	}
	return c
}

// Validate reports a negative field or a rate outside (0, 1].
func (c Circuit) Validate() error {
	switch {
	case c.Failures < 0 || c.CoolDown < 0 || c.MinCalls < 0 || c.Window < 0:
		return fmt.Errorf("%w: circuit: failures, min_calls, window and cool_down must not be negative", ErrInvalidConfig)
	case c.FailureRate < 0 || c.FailureRate > 1:
		return fmt.Errorf("%w: circuit: failure_rate must be in (0, 1], got %g", ErrInvalidConfig, c.FailureRate)
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

// Breaker counts one replica's recent attempts of one persona and their
// provider failures, in one-second buckets over the circuit's Window. It
// is safe for concurrent use.
type Breaker struct {
	c       Circuit
	width   time.Duration
	mu      sync.Mutex
	buckets []bucket
}

type bucket struct {
	at           int64 // bucket number (time / width)
	calls, fails int
}

// NewBreaker returns a breaker for c (with its defaults).
func NewBreaker(c Circuit) *Breaker {
	c = c.WithDefaults()
	width := min(time.Second, max(c.Window, time.Millisecond))
	n := max(int((c.Window+width-1)/width), 1)
	return &Breaker{c: c, width: width, buckets: make([]bucket, n)}
}

// Record counts one attempt answered at now: failed when the provider
// failed. trip is true when this attempt made the window's counts open
// the circuit (the counts restart then); failures is the window's
// failure count including it.
func (b *Breaker) Record(failed bool, now time.Time) (trip bool, failures int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	at := now.UnixNano() / int64(b.width)
	k := &b.buckets[int(at%int64(len(b.buckets)))]
	if k.at != at {
		*k = bucket{at: at}
	}
	k.calls++
	if failed {
		k.fails++
	}
	calls, fails := b.sum(at)
	if !failed || fails < b.c.Failures || calls < b.c.MinCalls || float64(fails) < b.c.FailureRate*float64(calls) {
		return false, fails
	}
	clear(b.buckets)
	return true, fails
}

// sum adds up the buckets inside the window that ends with bucket at.
func (b *Breaker) sum(at int64) (calls, fails int) {
	oldest := at - int64(len(b.buckets)) + 1
	for _, k := range b.buckets {
		if k.at >= oldest && k.at <= at {
			calls, fails = calls+k.calls, fails+k.fails
		}
	}
	return calls, fails
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
