package consumers

import (
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/rs/zerolog"

	"github.com/personaq/personaq/consumers/flow"
	"github.com/personaq/personaq/handlers"
	"github.com/personaq/personaq/retry"
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
	lastErr      time.Time // when a flow store error was last logged
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
		f.breaker = flow.NewBreaker(f.circuit.Failures)
	}
	return f
}

// gate is the persona's pull gate (nil interface without flow control).
func (p *personaRuntime) gate() Gate {
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

// storeError logs a flow store failure at most once per second.
func (f *personaFlow) storeError(err error, msg string) {
	f.mu.Lock()
	now := time.Now()
	quiet := now.Sub(f.lastErr) < time.Second
	if !quiet {
		f.lastErr = now
	}
	f.mu.Unlock()
	if !quiet {
		f.log.Warn().Err(err).Msg(msg)
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

// outcome feeds an attempt's outcome to the circuit: the half-open probe's
// decides; otherwise consecutive provider failures open it.
// settleTokens corrects the token reservation the pull made for this
// request (the limit's estimate) with the usage the persona reported, so
// the tokens-per-minute limit counts what the provider really served.
// Without a report the estimate stands.
func (f *personaFlow) settleTokens(st *attemptState) {
	if f.limiter == "" || st.result.Usage.IsZero() {
		return
	}
	lim, ok := f.lim.Limit(f.limiter)
	if !ok || lim.TokensPerMinute == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), ledgerTimeout)
	defer cancel()
	if err := f.lim.Settle(ctx, f.limiter, lim.EstimatedTokens, int(st.result.Usage.Tokens())); err != nil {
		f.log.Warn().Err(err).Str("limiter", f.limiter).Msg("token usage not settled with the limiter; its estimate stands")
	}
}

func (f *personaFlow) outcome(st *attemptState) {
	if f.breaker == nil {
		return
	}
	failed := handlers.ProviderFailed(st.err)
	f.mu.Lock()
	status := f.status
	f.probing = false
	f.mu.Unlock()
	switch {
	case status.State == flow.HalfOpen && status.Prober == f.r.replicaID:
		f.probed(st, failed)
	case status.State != flow.Closed:
		// An attempt pulled before the circuit opened: the probe decides.
	default:
		if trip, run := f.breaker.Record(failed); trip {
			f.open(st, run)
		}
	}
}

func (f *personaFlow) open(st *attemptState, failures int) {
	ctx, cancel := context.WithTimeout(context.Background(), ledgerTimeout)
	defer cancel()
	opened, s, err := f.circuits.Open(ctx, f.persona, f.circuit.CoolDown, failures)
	if err != nil {
		f.storeError(err, "circuit not opened: store unavailable")
		return
	}
	f.setStatus(s, "open")
	if !opened {
		return
	}
	f.pause(ctx, s.Until)
	st.log.Warn().Str("circuit", "open").Int("failures", failures).Time("until", s.Until).
		Float64("backoffSeconds", f.circuit.CoolDown.Seconds()).Str("last_error", st.attempt.Error).
		Msg("circuit open: the provider failed repeatedly; persona paused on the server for every replica until the cool-down ends, then one probe decides")
}

// probed closes the circuit after a successful probe, or opens it again.
func (f *personaFlow) probed(st *attemptState, failed bool) {
	ctx, cancel := context.WithTimeout(context.Background(), ledgerTimeout)
	defer cancel()
	if !failed {
		ok, err := f.circuits.Close(ctx, f.persona, f.r.replicaID)
		if err != nil {
			f.storeError(err, "circuit not closed: store unavailable")
			return
		}
		if ok {
			f.setStatus(flow.Status{}, "close")
			st.log.Info().Str("circuit", "closed").Msg("circuit closed: the half-open probe succeeded")
		}
		return
	}
	ok, s, err := f.circuits.Reopen(ctx, f.persona, f.r.replicaID, f.circuit.CoolDown)
	if err != nil || !ok {
		if err != nil {
			f.storeError(err, "circuit not reopened: store unavailable")
		}
		return
	}
	f.setStatus(s, "reopen")
	f.pause(ctx, s.Until)
	st.log.Warn().Str("circuit", "open").Int("failures", s.Failures).Time("until", s.Until).
		Float64("backoffSeconds", f.circuit.CoolDown.Seconds()).Str("last_error", st.attempt.Error).
		Msg("circuit open again: the half-open probe failed")
}

// pause pauses the persona's consumer on the server until until, unless an
// operator's pause already lasts longer (the breaker never shortens or
// lifts an operator's pause; its own pauses end by themselves).
func (f *personaFlow) pause(ctx context.Context, until time.Time) {
	durable := Durable(f.persona)
	if c, err := f.r.js.Consumer(ctx, f.r.topo.RequestsStream, durable); err == nil {
		if cfg := c.CachedInfo().Config; cfg.PauseUntil != nil && cfg.PauseUntil.After(until) {
			return
		}
	}
	if _, err := f.r.js.PauseConsumer(ctx, f.r.topo.RequestsStream, durable, until); err != nil {
		f.log.Warn().Err(err).Msg("circuit open but the consumer could not be paused on the server; replicas hold their pulls instead")
	}
}

// throttled handles a provider's 429 or 529 for a persona with a limiter:
// the limiter cools down for every replica for as long as the provider
// asked (or the cool-down running is extended), and the request is
// released until it ends without counting an attempt. It reports whether
// it released the request: false when the limiter could not be reached,
// and the 429 is then an ordinary retryable failure.
func (f *personaFlow) throttled(st *attemptState, wait time.Duration) bool {
	if f.limiter == "" {
		return false
	}
	ctx, cancel := context.WithTimeout(context.Background(), ledgerTimeout)
	defer cancel()
	cd, err := f.lim.CoolDown(ctx, f.limiter, wait)
	if err != nil {
		f.storeError(err, "provider throttled but the limiter could not cool down; retrying on the persona's schedule")
		return false
	}
	f.mu.Lock()
	f.coolUntil = time.Now().Add(cd.Remaining)
	f.mu.Unlock()
	if cd.Started {
		if o, ok := f.r.obs.(FlowObserver); ok {
			o.LimiterCoolDown(f.limiter)
		}
		st.log.Warn().Str("limiter", f.limiter).Float64("backoffSeconds", cd.Remaining.Seconds()).Int("attempt", st.attempt.Number).
			Msg("provider throttled: the limiter cools down for every replica")
	}
	// Throttling is the limiter's to absorb, not the request's failure: the
	// attempt is released until the cool-down ends without counting (the
	// consumer's MaxDeliver and the step deadline bound a provider that
	// never stops refusing).
	st.attempt.Class = retry.ClassSnooze
	delay := cd.Remaining + spread(cd.Remaining)
	st.decision = retry.Decision{Action: retry.ActionRetry, Counted: false, Delay: delay}
	st.verdict, st.delay = verdictRelease, delay
	st.log.Info().Str("limiter", f.limiter).Float64("backoffSeconds", delay.Seconds()).Int("attempt", st.attempt.Number).
		Msg("provider throttled; released until the limiter's cool-down ends without counting an attempt")
	return true
}

// afterAttempt applies flow control to an attempt's outcome (the circuit,
// a provider's throttling); true means the attempt was released without
// counting and nothing more is to be decided.
func (r *Runtime) afterAttempt(st *attemptState) bool {
	f := st.persona.flow
	wait, throttled := handlers.Throttled(st.err)
	if throttled {
		if o, ok := r.obs.(FlowObserver); ok {
			o.ProviderThrottled(st.persona.name)
		}
	}
	if f == nil {
		return false
	}
	f.settleTokens(st)
	f.outcome(st)
	if !throttled || !f.throttled(st, wait) {
		return false
	}
	r.obs.Attempt(st.persona.name, st.attempt.Class, st.attempt.Duration)
	return true
}

// flowMiddleware releases, without starting an attempt, a request pulled
// just before its persona's circuit opened or its limiter began to cool
// down: calling the provider now would only fail.
func (r *Runtime) flowMiddleware(next message.HandlerFunc) message.HandlerFunc {
	return func(msg *message.Message) ([]*message.Message, error) {
		st := stateOf(msg)
		if f := st.persona.flow; f != nil {
			if why, until := f.blocked(r.now()); why != "" {
				wait := max(until.Sub(r.now()), 0)
				st.verdict, st.delay = verdictRelease, wait+busyMargin+spread(wait)
				st.log.Info().Str("why", why).Float64("backoffSeconds", st.delay.Seconds()).
					Msg("request not started: flow control holds its persona; released without counting an attempt")
				return nil, nil
			}
		}
		return next(msg)
	}
}

// watchCircuits keeps this replica's view of the shared circuit states.
func (r *Runtime) watchCircuits(ctx context.Context) {
	var flows []*personaFlow
	for _, p := range r.personas {
		if p.flow != nil && p.flow.breaker != nil {
			flows = append(flows, p.flow)
		}
	}
	if len(flows) == 0 {
		return
	}
	poll := func() {
		for _, f := range flows {
			pctx, cancel := context.WithTimeout(ctx, ledgerTimeout)
			st, err := r.cfg.Circuits.Status(pctx, f.persona)
			cancel()
			if err != nil {
				f.storeError(err, "circuit state not read")
				continue
			}
			f.setStatus(st, "poll")
		}
	}
	poll()
	every(ctx, flowPoll, poll)
}

// watchBacklog reports each persona's runnable backlog: the requests
// KEDA's JetStream scaler would count (NumPending + NumAckPending) that
// could start now. None can while the circuit is open or half-open or
// while the limiter cools down; with a requests-per-minute limiter, no
// more than one minute of its starts can.
func (r *Runtime) watchBacklog(ctx context.Context) {
	o, ok := r.obs.(FlowObserver)
	if !ok {
		return
	}
	measure := func() {
		for _, p := range r.personas {
			n, ok := r.runnable(ctx, p)
			if ok {
				o.RunnableBacklog(p.name, n)
			}
		}
	}
	measure()
	interval := r.backlogEvery
	if interval == 0 {
		interval = backlogInterval
	}
	every(ctx, interval, measure)
}

func (r *Runtime) runnable(ctx context.Context, p *personaRuntime) (int, bool) {
	ictx, cancel := context.WithTimeout(ctx, ledgerTimeout)
	defer cancel()
	c, err := r.js.Consumer(ictx, r.topo.RequestsStream, Durable(p.name))
	if err != nil {
		return 0, false
	}
	info := c.CachedInfo()
	n := int(info.NumPending) + info.NumAckPending
	f := p.flow
	if f == nil {
		return n, true
	}
	if f.limiter != "" {
		if left, err := f.lim.Cooling(ictx, f.limiter); err == nil {
			f.mu.Lock()
			f.coolUntil = time.Now().Add(left)
			f.mu.Unlock()
		}
		if lim, _ := f.lim.Limit(f.limiter); lim.RequestsPerMinute > 0 {
			n = min(n, lim.RequestsPerMinute)
		}
	}
	f.mu.Lock()
	closed := f.status.State == flow.Closed
	f.mu.Unlock()
	if why, _ := f.blocked(time.Now()); why != "" || !closed {
		return 0, true
	}
	return n, true
}

// spread is a random part of up to a fifth of wait (at most 1s): requests
// released until a cool-down ends come back spread out behind the one
// whose retry waits exactly for it, not as one herd in the same order.
func spread(wait time.Duration) time.Duration {
	if limit := min(wait/5, time.Second); limit > 0 {
		return rand.N(limit)
	}
	return 0
}

// newReplicaID names this replica to the others (the half-open probe's
// holder): host name and a random suffix.
func newReplicaID() string {
	host, _ := os.Hostname()
	b := make([]byte, 4)
	_, _ = crand.Read(b)
	return host + "-" + hex.EncodeToString(b)
}

// validateFlow checks a persona's flow control against the runtime's.
func validateFlow(cfg Config, p Persona) error {
	if p.Limiter != "" {
		if cfg.Limiter == nil {
			return fmt.Errorf("limiter: %q named but the runtime has no Limiter", p.Limiter)
		}
		if _, ok := cfg.Limiter.Limit(p.Limiter); !ok {
			return fmt.Errorf("limiter: unknown limiter %q (known: %s)", p.Limiter, strings.Join(cfg.Limiter.Names(), ", "))
		}
	}
	if err := p.Circuit.Validate(); err != nil {
		return err
	}
	if p.Circuit.On() && cfg.Circuits == nil {
		return errors.New("circuit: a circuit breaker needs the runtime's Circuits (Redis)")
	}
	return nil
}

// Consumer metadata keys for flow control (`persona ls` shows them).
const (
	metaLimiter = "personaq.limiter"
	metaCircuit = "personaq.circuit"
)

// addFlowMetadata writes the persona's limiter and circuit breaker into its
// consumer's metadata.
func addFlowMetadata(md map[string]string, p Persona) {
	if p.Limiter != "" {
		md[metaLimiter] = p.Limiter
	}
	if c := p.Circuit.WithDefaults(); c.On() {
		md[metaCircuit] = fmt.Sprintf("%d/%s", c.Failures, c.CoolDown)
	}
}

// FlowInfo is what a persona's consumer metadata says about its flow
// control: its limiter ("" none) and circuit breaker ("failures/cool-down",
// "" none).
func FlowInfo(md map[string]string) (limiter, circuit string) {
	return md[metaLimiter], md[metaCircuit]
}
