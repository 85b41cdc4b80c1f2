package consumers

import (
	"context"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/personaq/personaq/consumers/flow"
	"github.com/personaq/personaq/consumers/transport"
)

// FlowObserver is an Observer that also receives flow control's
// measurements (Prometheus: personaq_circuit_open, personaq_runnable_backlog,
// personaq_limiter_wait_seconds, personaq_limiter_cooldowns_total,
// personaq_provider_throttled_total).
type FlowObserver interface {
	Observer
	// CircuitOpen reports a persona's circuit as this replica knows it:
	// open (open or half-open) or closed.
	CircuitOpen(persona string, open bool)
	// RunnableBacklog reports a persona's requests that could start now
	// (Runtime documents how it is counted).
	RunnableBacklog(persona string, n int)
	// LimiterWait reports how long a pull waited for a limiter's permit
	// (0 when it had one at once).
	LimiterWait(limiter string, waited time.Duration)
	// LimiterCoolDown is called when a provider's 429 or 529 starts a
	// limiter's cool-down.
	LimiterCoolDown(limiter string)
	// ProviderThrottled is called for every 429 or 529 a persona received.
	ProviderThrottled(persona string)
}

// flowPoll is how often a replica reads the shared circuit states, and the
// longest a pull held back by a circuit waits before looking again.
const flowPoll = 500 * time.Millisecond

// backlogInterval is how often the runnable backlog is measured.
const backlogInterval = 5 * time.Second

// flowErrorWait is how long a pull waits when the limiter or the circuit
// store cannot be asked (Redis down): nothing is pulled meanwhile.
const flowErrorWait = time.Second

// personaFlow is one persona's flow control on this replica: the pull gate
// (limiter permits, circuit state) and what attempts' outcomes do to them.
type personaFlow struct {
	r        *Runtime
	persona  string
	limiter  string // "" without a limiter
	lim      *flow.Limiter
	circuit  flow.Circuit // off without a breaker
	circuits *flow.Circuits
	breaker  *flow.Breaker
	claim    time.Duration // how long a half-open probe is held
	log      zerolog.Logger

	mu           sync.Mutex
	status       flow.Status
	probing      bool      // this replica's probe was pulled and has not ended
	probeAt      time.Time // when it was pulled
	coolUntil    time.Time // the limiter's cool-down as last seen
	waitingSince time.Time // a pull has waited for a permit since (zero: not waiting)
}

func (r *Runtime) newPersonaFlow(p Persona, pr *personaRuntime) *personaFlow {
	if p.Limiter == "" && !p.Circuit.On() {
		return nil
	}
	f := &personaFlow{
		r: r, persona: p.Name, limiter: p.Limiter, lim: r.cfg.Limiter,
		circuit: p.Circuit.WithDefaults(), circuits: r.cfg.Circuits, claim: pr.spec.AckWait,
		log: r.log.With().Str("persona", p.Name).Logger(),
	}
	if p.Limiter != "" {
		f.log = f.log.With().Str("limiter", p.Limiter).Logger()
	}
	if f.circuit.On() {
		f.breaker = flow.NewBreaker(f.circuit)
	}
	return f
}

// gate is the persona's pull gate (nil interface without flow control).
func (p *personaRuntime) gate() transport.Gate {
	if p.flow == nil {
		return nil
	}
	return p.flow
}

// Admit implements Gate: the circuit first (closed: all; open: none;
// half-open: one probe on one replica), then the limiter's permits.
func (f *personaFlow) Admit(ctx context.Context, n int) (int, time.Duration) {
	if f.breaker != nil {
		var wait time.Duration
		if n, wait = f.circuitAdmit(ctx, n); n == 0 {
			return 0, wait
		}
	}
	if f.limiter == "" {
		return n, 0
	}
	lctx, cancel := context.WithTimeout(ctx, ledgerTimeout)
	g, err := f.lim.Acquire(lctx, f.limiter, n)
	cancel()
	if err != nil {
		f.storeError(err, "rate limiter unavailable; pulling nothing meanwhile")
		f.unprobe()
		return 0, flowErrorWait
	}
	now := time.Now()
	f.mu.Lock()
	defer f.mu.Unlock()
	if g.N == 0 {
		if g.CoolingDown {
			f.coolUntil = now.Add(g.Wait)
		}
		if f.waitingSince.IsZero() {
			f.waitingSince = now
		}
		f.probing = false
		return 0, g.Wait
	}
	var waited time.Duration
	if !f.waitingSince.IsZero() {
		waited, f.waitingSince = now.Sub(f.waitingSince), time.Time{}
	}
	if o, ok := f.r.obs.(FlowObserver); ok {
		o.LimiterWait(f.limiter, waited)
	}
	return g.N, 0
}

// Unused implements Gate: permits that brought no message go back to the
// limiter, and a probe that found nothing to pull is no longer running.
func (f *personaFlow) Unused(ctx context.Context, n int) {
	f.unprobe()
	if f.limiter == "" {
		return
	}
	lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), ledgerTimeout)
	defer cancel()
	if err := f.lim.Release(lctx, f.limiter, n); err != nil {
		f.storeError(err, "unused rate limiter permits not given back")
	}
}

func (f *personaFlow) unprobe() {
	f.mu.Lock()
	f.probing = false
	f.mu.Unlock()
}

// circuitAdmit applies the circuit to a pull of n.
func (f *personaFlow) circuitAdmit(ctx context.Context, n int) (int, time.Duration) {
	now := time.Now()
	f.mu.Lock()
	mode, wait := f.status.Pull(f.r.replicaID, now, flowPoll)
	if f.probing && now.Sub(f.probeAt) > f.claim {
		f.probing = false // its claim lapsed: whatever became of it, probe again
	}
	probing := f.probing
	f.mu.Unlock()
	switch mode {
	case flow.PullAll:
		return n, 0
	case flow.PullNone:
		return 0, wait
	}
	if probing {
		return 0, flowPoll // one probe at a time
	}
	lctx, cancel := context.WithTimeout(ctx, ledgerTimeout)
	granted, st, err := f.circuits.Probe(lctx, f.persona, f.r.replicaID, f.claim, f.circuit.CoolDown)
	cancel()
	if err != nil {
		f.storeError(err, "circuit store unavailable; pulling nothing meanwhile")
		return 0, flowErrorWait
	}
	f.setStatus(st, "probe")
	if !granted {
		_, wait := st.Pull(f.r.replicaID, time.Now(), flowPoll)
		return 0, max(wait, time.Millisecond)
	}
	f.mu.Lock()
	f.probing, f.probeAt = true, time.Now()
	f.mu.Unlock()
	return 1, 0
}

// setStatus records the circuit's shared state, logging and reporting a
// change; source says who saw it (poll: another replica changed it).
func (f *personaFlow) setStatus(st flow.Status, source string) {
	f.mu.Lock()
	was := f.status.State
	f.status = st
	if st.State != flow.HalfOpen || st.Prober != f.r.replicaID {
		f.probing = false
	}
	f.mu.Unlock()
	if o, ok := f.r.obs.(FlowObserver); ok {
		o.CircuitOpen(f.persona, st.State != flow.Closed)
	}
	if was == st.State || source != "poll" {
		return
	}
	f.log.Info().Str("circuit", st.State.String()).Int("failures", st.Failures).Time("until", st.Until).
		Msg("circuit state changed (seen in the shared store)")
}

// storeError logs a flow store failure, one line per message every
// ratelog.DefaultInterval however often it repeats.
func (f *personaFlow) storeError(err error, msg string) {
	if ok, held := f.r.quiet.Allow("flow/" + f.persona + "/" + msg); ok {
		f.log.Warn().Err(err).Int("held_back", held).Msg(msg)
	}
}

// blocked reports whether the persona's requests cannot start now: its
// circuit is not closed, or its limiter cools down.
func (f *personaFlow) blocked(now time.Time) (why string, until time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	switch {
	case f.status.State == flow.Open && now.Before(f.status.Until):
		return "circuit open", f.status.Until
	case f.status.State == flow.HalfOpen && f.status.Prober != f.r.replicaID:
		return "circuit half-open (another replica probes)", now.Add(flowPoll)
	case now.Before(f.coolUntil):
		return "rate limiter cooling down", f.coolUntil
	}
	return "", time.Time{}
}
