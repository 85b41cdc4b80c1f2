package consumers_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/personaq/personaq/consumers"
	"github.com/personaq/personaq/consumers/flow"
	"github.com/personaq/personaq/consumers/ledger"
	"github.com/personaq/personaq/consumers/wire"
	"github.com/personaq/personaq/handlers"
	"github.com/personaq/personaq/integration/testenv"
	"github.com/personaq/personaq/retry"
	"github.com/personaq/personaq/schemas"
)

// Flow control against an HTTP provider stand-in (provider in
// flow_test.go), three replicas (Runtimes in this process) on one
// in-process nats-server (R1, file storage, sync always) and one real
// redis-server:
//
//	go test -run='^$' -bench='^BenchmarkFlowLimiter$' -benchtime=1x -count=3 ./consumers/
//	go test -run='^$' -bench='^BenchmarkFlowCircuit$' -benchtime=1x -count=3 ./consumers/
//
// BenchmarkFlowLimiter: the provider admits flowRate requests/s (a token
// bucket refilling flowRate/s holding one second's worth, ProviderBurst=1s,
// or a tenth of a second's, ProviderBurst=100ms; past it, 429 with
// Retry-After: 1); the limiter is set 3% below it (requests_per_minute
// = 0.97 × 60 × flowRate, burst 5), as an operator sets a limiter under a
// provider's published limit. A backlog of flowSeconds × flowRate requests
// is published up front. Reported: the throughput the provider saw (its
// successful calls from its first to its last) as a share of flowRate, and
// the 429s as a share of all calls.
//
// BenchmarkFlowCircuit: the provider answers 503 for flowDown; the
// persona's circuit (5 failures, cool-down flowCoolDown) is compared with
// no circuit. Reported: the provider calls made during the outage, split
// into those before the circuit opened, those already in flight when it
// opened (the first half cool-down after) and the probes after that, and
// the cool-downs the outage lasted while open.
const (
	flowRate     = 100
	flowSeconds  = 20
	flowReplicas = 3
	flowDown     = 6 * time.Second
	flowCoolDown = 600 * time.Millisecond
)

type flowBench struct {
	nats     *testenv.NATS
	cfg      consumers.Config
	ledger   consumers.Ledger
	limiter  *flow.Limiter
	circuits *flow.Circuits
}

func newFlowBench(b *testing.B, limits map[string]flow.Limit) *flowBench {
	b.Helper()
	n := testenv.StartNATS(b)
	js := n.JetStream(b)
	if err := consumers.Provision(context.Background(), js, wire.Topology{}, nil); err != nil {
		b.Fatal(err)
	}
	client := testenv.StartRedis(b).Client(b)
	l, err := ledger.New(ledger.Config{Client: client})
	if err != nil {
		b.Fatal(err)
	}
	fb := &flowBench{nats: n, ledger: l}
	if limits != nil {
		if fb.limiter, err = flow.NewLimiter(flow.LimiterConfig{Client: client, Limits: limits}); err != nil {
			b.Fatal(err)
		}
	}
	if fb.circuits, err = flow.NewCircuits(client, ""); err != nil {
		b.Fatal(err)
	}
	log := zerolog.Nop()
	fb.cfg = consumers.Config{JetStream: js, Ledger: l, Logger: &log, Limiter: fb.limiter, Circuits: fb.circuits,
		DrainTimeout: 2 * time.Second, FetchMaxWait: 200 * time.Millisecond, NoAttemptEvents: true}
	return fb
}

// start runs replicas of p until the benchmark ends.
func (fb *flowBench) start(b *testing.B, p consumers.Persona) {
	b.Helper()
	for range flowReplicas {
		cfg := fb.cfg
		cfg.Personas = []consumers.Persona{p}
		rt, err := consumers.New(cfg)
		if err != nil {
			b.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { _ = rt.Run(ctx); close(done) }()
		b.Cleanup(func() { cancel(); <-done })
	}
}

func (fb *flowBench) publish(b *testing.B, persona string, n int) {
	b.Helper()
	for i := range n {
		req := schemas.NewRequest(fmt.Sprintf("t%d", i), "main", persona)
		if _, err := wire.PublishRequest(context.Background(), fb.cfg.JetStream, wire.Topology{}, req); err != nil {
			b.Fatal(err)
		}
	}
}

func benchHTTPPersona(b *testing.B, name, url string, pol retry.Policy) consumers.Persona {
	inv, err := handlers.NewHTTP(handlers.HTTPConfig{URL: url})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(inv.CloseIdleConnections)
	return consumers.Persona{Name: name, Handler: inv, Policy: pol, Concurrency: 16}
}

func (p *provider) waitOK(b *testing.B, n int, timeout time.Duration) {
	b.Helper()
	deadline := time.Now().Add(timeout)
	for {
		if _, ok, _, _ := p.counts(); ok >= n {
			return
		}
		if time.Now().After(deadline) {
			calls, ok, throttled, failed := p.counts()
			b.Fatalf("timed out: %d calls, %d ok, %d throttled, %d failed", calls, ok, throttled, failed)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func BenchmarkFlowLimiter(b *testing.B) {
	for _, burst := range []time.Duration{time.Second, 100 * time.Millisecond} {
		b.Run("ProviderBurst="+burst.String(), func(b *testing.B) {
			for range b.N {
				benchLimiter(b, float64(flowRate)*burst.Seconds())
			}
		})
	}
}

func benchLimiter(b *testing.B, providerBurst float64) {
	prov := newProvider(b, flowRate, providerBurst, "1")
	fb := newFlowBench(b, map[string]flow.Limit{"provider": {RequestsPerMinute: flowRate * 60 * 97 / 100, Burst: 5}})
	p := benchHTTPPersona(b, "bench", prov.srv.URL, retry.Policy{Name: "bench", MaxAttempts: 5,
		AttemptTimeout: 10 * time.Second, Schedule: retry.Linear{Step: 100 * time.Millisecond}})
	p.Limiter = "provider"
	n := flowSeconds * flowRate
	fb.publish(b, "bench", n)
	b.ResetTimer()
	fb.start(b, p)
	prov.waitOK(b, n, time.Duration(flowSeconds*3)*time.Second)
	b.StopTimer()
	prov.mu.Lock()
	var first, last time.Time
	for _, c := range prov.calls {
		if first.IsZero() || c.Before(first) {
			first = c
		}
		if c.After(last) {
			last = c
		}
	}
	calls, ok, throttled := len(prov.calls), prov.ok, prov.throttled
	prov.mu.Unlock()
	rate := float64(ok-1) / last.Sub(first).Seconds()
	b.ReportMetric(rate, "ok_calls/s")
	b.ReportMetric(rate/flowRate, "share_of_limit")
	b.ReportMetric(100*float64(throttled)/float64(calls), "429_pct")
	b.ReportMetric(float64(throttled), "429s")
}

func BenchmarkFlowCircuit(b *testing.B) {
	for _, withCircuit := range []bool{true, false} {
		name := "Circuit"
		if !withCircuit {
			name = "NoCircuit"
		}
		b.Run(name, func(b *testing.B) {
			for range b.N {
				benchCircuit(b, withCircuit)
			}
		})
	}
}

func benchCircuit(b *testing.B, withCircuit bool) {
	prov := newProvider(b, 0, 0, "")
	prov.setDown(true)
	fb := newFlowBench(b, nil)
	obs := newFlowObs()
	fb.cfg.Observer = obs
	p := benchHTTPPersona(b, "bench", prov.srv.URL, retry.Policy{Name: "bench", MaxAttempts: 1000,
		AttemptTimeout: 10 * time.Second, Schedule: retry.Fixed{Every: 200 * time.Millisecond}})
	if withCircuit {
		p.Circuit = flow.Circuit{Failures: 5, CoolDown: flowCoolDown}
	}
	const n = 300
	fb.publish(b, "bench", n)
	b.ResetTimer()
	start := time.Now()
	fb.start(b, p)
	<-time.After(flowDown)
	upAt := time.Now()
	prov.setDown(false)
	prov.waitOK(b, n, time.Minute)
	b.StopTimer()
	during := prov.callsBetween(start, upAt)
	b.ReportMetric(float64(during), "calls_while_down")
	if !withCircuit {
		return
	}
	obs.mu.Lock()
	var openedAt time.Time
	if len(obs.opened) > 0 {
		openedAt = obs.opened[0]
	}
	obs.mu.Unlock()
	if openedAt.IsZero() {
		b.Fatal("the circuit never opened")
	}
	b.ReportMetric(float64(prov.callsBetween(start, openedAt)), "calls_before_open")
	// Calls in the first half cool-down were already in flight (pulled
	// before the circuit opened, on every replica); after it, each call is
	// a half-open probe.
	settled := openedAt.Add(flowCoolDown / 2)
	b.ReportMetric(float64(prov.callsBetween(openedAt, settled)), "calls_in_flight_at_open")
	b.ReportMetric(float64(prov.callsBetween(settled, upAt)), "probes")
	b.ReportMetric(float64(upAt.Sub(openedAt)/flowCoolDown), "cooldowns_while_open")
	if _, ok, _, _ := prov.counts(); ok < n {
		b.Fatal("requests lost")
	}
}
