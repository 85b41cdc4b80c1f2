package consumers

import (
	"context"
	"math/rand/v2"
	"time"

	"github.com/personaq/personaq/consumers/flow"
	"github.com/personaq/personaq/handlers"
	"github.com/personaq/personaq/retry"
)

// How flow control reads an attempt's end: the token usage it reported,
// the circuit breaker's count, a provider's throttling. decide says which
// apply (effects); commit applies them (applyEffects).

// settleTokens corrects the token reservation the pull made for this
// request (the limit's estimate) with the usage the persona reported, so
// the tokens-per-minute limit counts what the provider really served.
// Without a report the estimate stands.
func (f *personaFlow) settleTokens(st *attemptState) {
	if f.limiter == "" || st.attempt.Usage.IsZero() {
		return
	}
	lim, ok := f.lim.Limit(f.limiter)
	if !ok || lim.TokensPerMinute == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), ledgerTimeout)
	defer cancel()
	if err := f.lim.Settle(ctx, f.limiter, lim.EstimatedTokens, int(st.attempt.Usage.Tokens())); err != nil {
		f.log.Warn().Err(err).Str("limiter", f.limiter).Msg("token usage not settled with the limiter; its estimate stands")
	}
}

// outcome feeds an attempt's outcome to the circuit: the half-open probe's
// decides; otherwise the failure rate over the breaker's window opens it.
// A paced answer (one that names a Retry-After: the provider asking us to
// slow down, not failing) is not counted either way.
func (f *personaFlow) outcome(st *attemptState, err error) {
	if f.breaker == nil {
		return
	}
	failed := handlers.ProviderFailed(err)
	if failed && paced(err) {
		return
	}
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
		if trip, failures := f.breaker.Record(failed, time.Now()); trip {
			f.open(st, failures)
		}
	}
}

// paced reports whether a failed attempt's answer named how long to wait
// (Retry-After or the like): pacing, which the limiter and the retry delay
// honour, not an outage.
func paced(err error) bool {
	return handlers.Classify(err).RetryAfter > 0
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
		Msg("circuit open: most recent attempts failed (failure rate over the window); persona paused on the server for every replica until the cool-down ends, then one probe decides")
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
func (f *personaFlow) throttled(st *attemptState, wait time.Duration) (ending, bool) {
	if f.limiter == "" {
		return ending{}, false
	}
	ctx, cancel := context.WithTimeout(context.Background(), ledgerTimeout)
	defer cancel()
	cd, err := f.lim.CoolDown(ctx, f.limiter, wait)
	if err != nil {
		f.storeError(err, "provider throttled but the limiter could not cool down; retrying on the persona's schedule")
		return ending{}, false
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
	end := released(cd.Remaining + spread(cd.Remaining))
	st.log.Info().Str("limiter", f.limiter).Float64("backoffSeconds", end.delay.Seconds()).Int("attempt", st.attempt.Number).
		Msg("provider throttled; released until the limiter's cool-down ends without counting an attempt")
	return end, true
}

// admit is the stage before begin: a request pulled just before its
// persona's circuit opened or its limiter began to cool down is released
// without starting an attempt, since calling the provider now would only
// fail.
func (r *Runtime) admit(st *attemptState) (ending, bool) {
	f := st.persona.flow
	if f == nil {
		return ending{}, false
	}
	why, until := f.blocked(r.now())
	if why == "" {
		return ending{}, false
	}
	wait := max(until.Sub(r.now()), 0)
	end := released(wait + busyMargin + spread(wait))
	st.log.Info().Str("why", why).Float64("backoffSeconds", end.delay.Seconds()).
		Msg("request not started: flow control holds its persona; released without counting an attempt")
	return end, true
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
