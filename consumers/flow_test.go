package consumers_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/personaq/personaq/consumers"
	"github.com/personaq/personaq/consumers/flow"
	"github.com/personaq/personaq/consumers/ledger"
	"github.com/personaq/personaq/consumers/wire"
	"github.com/personaq/personaq/handlers"
	"github.com/personaq/personaq/integration/testenv"
	"github.com/personaq/personaq/retry"
	"github.com/personaq/personaq/schemas"
)

// provider is an HTTP stand-in for an AI provider: a token bucket of rate
// per second and burst (0: no limit) answering 429 with Retry-After past
// it, and 503 while down.
type provider struct {
	srv        *httptest.Server
	retryAfter string // Retry-After header of a 429
	mu         sync.Mutex
	rate       float64
	burst      float64
	tokens     float64
	last       time.Time
	down       bool
	calls      []time.Time // every call
	ok         int
	throttled  int
	failed     int
}

func newProvider(t testing.TB, rate, burst float64, retryAfter string) *provider {
	p := &provider{rate: rate, burst: burst, tokens: burst, last: time.Now(), retryAfter: retryAfter}
	p.srv = httptest.NewServer(http.HandlerFunc(p.serve))
	t.Cleanup(p.srv.Close)
	return p
}

func (p *provider) serve(w http.ResponseWriter, _ *http.Request) {
	p.mu.Lock()
	now := time.Now()
	p.calls = append(p.calls, now)
	if p.down {
		p.failed++
		p.mu.Unlock()
		http.Error(w, `{"error":{"type":"server_error"}}`, http.StatusServiceUnavailable)
		return
	}
	if p.rate > 0 {
		p.tokens = min(p.burst, p.tokens+now.Sub(p.last).Seconds()*p.rate)
		p.last = now
		if p.tokens < 1 {
			p.throttled++
			p.mu.Unlock()
			w.Header().Set("Retry-After", p.retryAfter)
			http.Error(w, `{"error":{"type":"rate_limit_error"}}`, http.StatusTooManyRequests)
			return
		}
		p.tokens--
	}
	p.ok++
	p.mu.Unlock()
	_, _ = w.Write([]byte(`{"output":"done"}`))
}

func (p *provider) setDown(down bool) {
	p.mu.Lock()
	p.down = down
	p.mu.Unlock()
}

func (p *provider) counts() (calls, ok, throttled, failed int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.calls), p.ok, p.throttled, p.failed
}

func (p *provider) callsBetween(from, to time.Time) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, c := range p.calls {
		if !c.Before(from) && c.Before(to) {
			n++
		}
	}
	return n
}

// flowObs records flow control's measurements across replicas.
type flowObs struct {
	mu        sync.Mutex
	cooldowns int
	throttled int
	open      map[string]bool
	opened    []time.Time // when any replica first saw the circuit open
	runnable  map[string]int
}

func newFlowObs() *flowObs { return &flowObs{open: map[string]bool{}, runnable: map[string]int{}} }

func (o *flowObs) Attempt(string, retry.Class, time.Duration)      {}
func (o *flowObs) Outcome(string, schemas.Outcome, schemas.Reason) {}
func (o *flowObs) InFlight(string, int)                            {}
func (o *flowObs) RedeliveryLateness(string, time.Duration)        {}
func (o *flowObs) LedgerCall(string, time.Duration, error)         {}
func (o *flowObs) SettleRefused(string, schemas.Outcome)           {}
func (o *flowObs) LimiterWait(string, time.Duration)               {}

func (o *flowObs) CircuitOpen(persona string, open bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if open && !o.open[persona] {
		o.opened = append(o.opened, time.Now())
	}
	o.open[persona] = open
}

func (o *flowObs) RunnableBacklog(persona string, n int) {
	o.mu.Lock()
	o.runnable[persona] = n
	o.mu.Unlock()
}

func (o *flowObs) LimiterCoolDown(string) {
	o.mu.Lock()
	o.cooldowns++
	o.mu.Unlock()
}

func (o *flowObs) ProviderThrottled(string) {
	o.mu.Lock()
	o.throttled++
	o.mu.Unlock()
}

func (o *flowObs) isOpen(persona string) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.open[persona]
}

// flowHarness is a harness whose ledger, limiter and circuits share one
// real redis-server.
func newFlowHarness(t *testing.T, limits map[string]flow.Limit) (*harness, *flow.Limiter, *flow.Circuits) {
	t.Helper()
	h := newHarness(t, false)
	client := testenv.StartRedis(t).Client(t)
	l, err := ledger.New(ledger.Config{Client: client})
	require.NoError(t, err)
	// The ledger's data set begins before anything is published, as a
	// deployed one's does (a message older than it is floored by its
	// delivery count, as after a wipe).
	_, err = l.Epoch(context.Background())
	require.NoError(t, err)
	h.ledger = l
	var lim *flow.Limiter
	if limits != nil {
		lim, err = flow.NewLimiter(flow.LimiterConfig{Client: client, Limits: limits})
		require.NoError(t, err)
	}
	circuits, err := flow.NewCircuits(client, "")
	require.NoError(t, err)
	return h, lim, circuits
}

func httpPersona(t *testing.T, name, url string, pol retry.Policy) consumers.Persona {
	t.Helper()
	inv, err := handlers.NewHTTP(handlers.HTTPConfig{URL: url})
	require.NoError(t, err)
	return consumers.Persona{Name: name, Handler: inv, Policy: pol, Concurrency: 8}
}

// TestFlowLimiterCoolDownAcrossReplicas: a provider allowing 20 requests/s
// answers 429 with Retry-After past it; the limiter (set too high, at
// 40/s, to make the provider push back) is shared by two replicas. Every
// request succeeds, none is quarantined, and no 429 is counted as an
// attempt: the one that starts a cool-down and those arriving during it
// are released uncounted until the cool-down ends.
func TestFlowLimiterCoolDownAcrossReplicas(t *testing.T) {
	t.Parallel()
	prov := newProvider(t, 20, 5, "1")
	h, lim, circuits := newFlowHarness(t, map[string]flow.Limit{"provider-x": {RequestsPerMinute: 2400, Burst: 20}})
	obs := newFlowObs()
	p := httpPersona(t, "writer", prov.srv.URL, fastPolicy(4))
	p.Limiter = "provider-x"
	mod := func(c *consumers.Config) { c.Limiter, c.Circuits, c.Observer = lim, circuits, obs }
	h.startMod(mod, p)
	h.startMod(mod, p)
	out := h.watchOutcomes()

	const n = 80
	var reqs []*schemas.PersonaRequest
	for i := range n {
		reqs = append(reqs, h.publish("writer", fmt.Sprintf("t%d", i)))
	}
	counted := 0
	for _, req := range reqs {
		ev := out.wait(t, req.RequestID, 60*time.Second)
		require.Equal(t, schemas.OutcomeSucceeded, ev.Outcome, "request %s: %s %s", req.RequestID, ev.Reason, ev.Detail)
		counted += ev.Attempts - 1 // every failed attempt here was a 429
	}
	calls, ok, throttled, _ := prov.counts()
	obs.mu.Lock()
	cooldowns, seen := obs.cooldowns, obs.throttled
	obs.mu.Unlock()
	t.Logf("calls %d, succeeded %d, 429s %d, cool-downs %d, 429s counted as attempts %d", calls, ok, throttled, cooldowns, counted)
	require.Equal(t, n, ok)
	require.Positive(t, throttled, "the limiter was set above the provider's limit: it must have pushed back")
	require.LessOrEqual(t, seen, throttled, "the runtime saw the provider's 429s")
	require.Positive(t, cooldowns, "the provider's 429s cooled the limiter down")
	require.Zero(t, counted, "no 429 is counted as an attempt: the limiter absorbs them")
	// The outcome event is confirmed before the ack: the last acks may lag.
	require.Eventually(t, func() bool { return h.requestsLeft() == 0 }, 10*time.Second, 10*time.Millisecond)
}

// TestFlowLimiterBelowProviderLimit: with the limiter at the provider's
// limit, no request is ever refused: replicas do not pull what they cannot
// start, and the provider sees no 429.
func TestFlowLimiterBelowProviderLimit(t *testing.T) {
	t.Parallel()
	prov := newProvider(t, 50, 10, "1")
	h, lim, circuits := newFlowHarness(t, map[string]flow.Limit{"provider-y": {RequestsPerMinute: 2700, Burst: 5}})
	p := httpPersona(t, "coder", prov.srv.URL, fastPolicy(3))
	p.Limiter = "provider-y"
	mod := func(c *consumers.Config) { c.Limiter, c.Circuits = lim, circuits }
	h.startMod(mod, p)
	h.startMod(mod, p)
	out := h.watchOutcomes()
	const n = 60
	start := time.Now()
	var reqs []*schemas.PersonaRequest
	for i := range n {
		reqs = append(reqs, h.publish("coder", fmt.Sprintf("t%d", i)))
	}
	for _, req := range reqs {
		ev := out.wait(t, req.RequestID, 30*time.Second)
		require.Equal(t, schemas.OutcomeSucceeded, ev.Outcome)
		require.Equal(t, 1, ev.Attempts)
	}
	took := time.Since(start)
	_, ok, throttled, _ := prov.counts()
	require.Equal(t, n, ok)
	require.Zero(t, throttled)
	// 45/s after a burst of 5: 55 requests need at least ~1.2s.
	require.Greater(t, took, time.Second, "the limiter paced the pulls")
}

// TestFlowCircuitOpensPausesAndProbes: a provider down (503) opens the
// persona's circuit once 3 of a replica's calls failed, all of them (the
// breaker's minimum of calls lowered to 3, so each replica trips on its own
// as soon as the other would tell it: replicas read the shared state every
// flowPoll, and a held retry on one that has not read it yet still calls
// the provider); the consumer is paused
// on the server, each cool-down lets one probe through, and refused
// requests burn no attempt. When the provider is back, the probe closes
// the circuit and every request succeeds.
func TestFlowCircuitOpensPausesAndProbes(t *testing.T) {
	t.Parallel()
	prov := newProvider(t, 0, 0, "")
	prov.setDown(true)
	h, _, circuits := newFlowHarness(t, nil)
	obs := newFlowObs()
	pol := fastPolicy(30)
	p := httpPersona(t, "tester", prov.srv.URL, pol)
	p.Concurrency = 2
	cool := 300 * time.Millisecond
	p.Circuit = flow.Circuit{Failures: 3, MinCalls: 3, CoolDown: cool}
	mod := func(c *consumers.Config) { c.Circuits, c.Observer = circuits, obs }
	h.startMod(mod, p)
	h.startMod(mod, p)
	out := h.watchOutcomes()
	var reqs []*schemas.PersonaRequest
	for i := range 10 {
		reqs = append(reqs, h.publish("tester", fmt.Sprintf("t%d", i)))
	}
	require.Eventually(t, func() bool { return obs.isOpen("tester") }, 10*time.Second, 5*time.Millisecond)
	obs.mu.Lock()
	openedAt := obs.opened[0]
	obs.mu.Unlock()
	require.Eventually(t, func() bool {
		c, err := h.js.Consumer(context.Background(), h.topo.RequestsStream, wire.Durable("tester"))
		return err == nil && c.CachedInfo().Paused
	}, 5*time.Second, 10*time.Millisecond, "the consumer is paused on the server")

	// Down for 2s after the circuit opened: ~6 cool-downs of 300ms.
	down := 2 * time.Second
	<-time.After(time.Until(openedAt.Add(down))) // the outage lasts a set time
	upAt := time.Now()
	prov.setDown(false)
	// Attempts already running when the circuit opened may reach the
	// provider a little after; from half a cool-down on, only probes do.
	during := prov.callsBetween(openedAt.Add(cool/2), upAt)
	probes := int(down/cool) + 1
	t.Logf("calls while open: %d (at most one probe per cool-down: %d)", during, probes)
	require.LessOrEqual(t, during, probes+2, "one probe per cool-down, not one call per request")

	total := 0
	for _, req := range reqs {
		ev := out.wait(t, req.RequestID, 30*time.Second)
		require.Equal(t, schemas.OutcomeSucceeded, ev.Outcome)
		total += ev.Attempts
	}
	require.Eventually(t, func() bool { return !obs.isOpen("tester") }, 5*time.Second, 10*time.Millisecond)
	calls, _, _, _ := prov.counts()
	require.Equal(t, calls, total, "attempts are the provider calls made: refused ones are not counted")
}

// TestFlowConfigValidation: a persona naming a limiter the runtime does not
// have fails fast, naming it.
func TestFlowConfigValidation(t *testing.T) {
	t.Parallel()
	h := newHarness(t, false)
	p := persona("p", failing(handlers.Retryable, "x %d"), fastPolicy(2))
	p.Limiter = "nope"
	_, err := consumers.New(consumers.Config{WithoutLedger: true, JetStream: h.js, Personas: []consumers.Persona{p}})
	require.ErrorIs(t, err, consumers.ErrInvalidConfig)
	require.ErrorContains(t, err, `limiter: "nope"`)
	p.Limiter, p.Circuit = "", flow.Circuit{Failures: 2}
	_, err = consumers.New(consumers.Config{WithoutLedger: true, JetStream: h.js, Personas: []consumers.Persona{p}})
	require.ErrorContains(t, err, "circuit")
}

var _ consumers.FlowObserver = (*flowObs)(nil)

// TestFlowCoolingLimiterHoldsNothing: while a limiter cools down, no
// replica pulls its persona's requests (they stay pending, none is held
// against AckWait, no attempt is made) and their runnable backlog is 0;
// another persona's backlog counts in full. When the cool-down ends they
// run.
func TestFlowCoolingLimiterHoldsNothing(t *testing.T) {
	t.Parallel()
	prov := newProvider(t, 0, 0, "")
	h, lim, circuits := newFlowHarness(t, map[string]flow.Limit{"provider-z": {RequestsPerMinute: 6000}})
	obs := newFlowObs()
	limited := httpPersona(t, "limited", prov.srv.URL, fastPolicy(3))
	limited.Limiter = "provider-z"
	free := persona("free", handlers.Func(func(ctx context.Context, _ *handlers.Request) (handlers.Result, error) {
		<-ctx.Done() // holds its requests: in flight, runnable
		return handlers.Result{}, ctx.Err()
	}), fastPolicy(3))
	// Long enough to outlast the checks below on a loaded machine (3 s did
	// not always: the limited requests were pulled before they ran).
	_, err := lim.CoolDown(context.Background(), "provider-z", 8*time.Second)
	require.NoError(t, err)
	h.startArmed(func(c *consumers.Config) { c.Limiter, c.Circuits, c.Observer = lim, circuits, obs },
		func(rt *consumers.Runtime) { rt.SetBacklogInterval(50 * time.Millisecond) }, limited, free)
	out := h.watchOutcomes()
	var reqs []*schemas.PersonaRequest
	for i := range 5 {
		reqs = append(reqs, h.publish("limited", fmt.Sprintf("l%d", i)))
		h.publish("free", fmt.Sprintf("f%d", i))
	}
	require.Eventually(t, func() bool {
		obs.mu.Lock()
		defer obs.mu.Unlock()
		return obs.runnable["free"] == 5
	}, 5*time.Second, 10*time.Millisecond, "pending plus in flight, as KEDA counts")
	c, err := h.js.Consumer(context.Background(), h.topo.RequestsStream, wire.Durable("limited"))
	require.NoError(t, err)
	info, err := c.Info(context.Background())
	require.NoError(t, err)
	require.EqualValues(t, 5, info.NumPending, "not pulled")
	require.Zero(t, info.NumAckPending, "nothing held against AckWait")
	obs.mu.Lock()
	require.Zero(t, obs.runnable["limited"], "nothing can start during the cool-down")
	obs.mu.Unlock()
	calls, _, _, _ := prov.counts()
	require.Zero(t, calls)
	for _, req := range reqs {
		ev := out.wait(t, req.RequestID, 25*time.Second)
		require.Equal(t, schemas.OutcomeSucceeded, ev.Outcome)
		require.Equal(t, 1, ev.Attempts)
	}
}

// TestFlowTokensSettleWithReportedUsage: a request reserves the limit's
// token estimate when it is pulled; the usage its persona reports replaces
// the estimate, so a limiter counting tokens per minute sees what the
// provider really served and holds the next request back.
func TestFlowTokensSettleWithReportedUsage(t *testing.T) {
	t.Parallel()
	limits := map[string]flow.Limit{"tok": {TokensPerMinute: 60000, EstimatedTokens: 10, TokenBurst: 1000}}
	h, lim, circuits := newFlowHarness(t, limits)
	p := persona("big", handlers.Func(func(context.Context, *handlers.Request) (handlers.Result, error) {
		return handlers.Result{Usage: retry.Usage{InputTokens: 20000, OutputTokens: 10000}}, nil
	}), fastPolicy(1))
	p.Limiter = "tok"
	h.startMod(func(c *consumers.Config) { c.Limiter, c.Circuits = lim, circuits }, p)
	out := h.watchOutcomes()
	ev := out.wait(t, h.publish("big", "t-big").RequestID, 10*time.Second)
	require.Equal(t, schemas.OutcomeSucceeded, ev.Outcome)
	g, err := lim.Acquire(context.Background(), "tok", 1)
	require.NoError(t, err)
	require.Zero(t, g.N, "30,000 tokens served at 1,000/s: the next request must wait")
	require.Greater(t, g.Wait, 20*time.Second)
}
