package consumers_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/personaq/personaq/consumers"
	"github.com/personaq/personaq/consumers/transport"
	"github.com/personaq/personaq/consumers/wire"
	"github.com/personaq/personaq/handlers"
	"github.com/personaq/personaq/integration/testenv"
)

// The benchmarks behind BENCHMARKS.md. They need a redis-server (see
// integration/testenv) and run against an in-process nats-server. Run them
// with a fixed -benchtime, e.g.
//
//	go test -run='^$' -bench='^BenchmarkPipelineRatio$' -benchtime=1x -count=3 ./consumers/
//
// Throughput is compared with a raw jetstream loop on the same server in
// the same run, as a ratio: the machines are shared and noisy.

// benchAckMode is how the raw loop settles a message.
type benchAckMode int

const (
	// benchAck acks in the Consume callback (fire and forget).
	benchAck benchAckMode = iota
	// benchDoubleAck hands each message to one of benchSlots workers that
	// DoubleAck it (waits for the server), as the runtime settles successes.
	benchDoubleAck
)

// benchRaw consumes n pre-published requests with a raw nats.go jetstream
// Consume loop on the durable consumer the runtime would use, and returns
// the time from starting the loop until every message is acked and the
// work-queue stream is empty. Only that part runs under the benchmark timer.
func benchRaw(b *testing.B, e *benchEnv, n int, mode benchAckMode) time.Duration {
	b.Helper()
	b.StopTimer()
	ctx := context.Background()
	topo := e.benchTopology(b)
	e.benchWorkQueue(b, topo) // the baseline: a work queue, each ack a stored delete
	if err := consumers.Provision(ctx, e.js, topo, []consumers.ConsumerSpec{benchSpec()}); err != nil {
		b.Fatal(err)
	}
	e.benchPublish(b, topo, benchRequests(b, n))
	js := e.benchJS(b) // the loop's own connection, as a replica has

	var acked, failed atomic.Int64
	done := make(chan struct{})
	count := func(err error) {
		if err != nil {
			failed.Add(1)
		}
		if acked.Add(1) == int64(n) {
			close(done)
		}
	}
	var workers sync.WaitGroup
	work := make(chan jetstream.Msg, benchSlots)
	handle := func(m jetstream.Msg) { count(m.Ack()) }
	if mode == benchDoubleAck {
		for range benchSlots {
			workers.Go(func() {
				for m := range work {
					ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
					count(m.DoubleAck(ctx))
					cancel()
				}
			})
		}
		handle = func(m jetstream.Msg) { work <- m }
	}

	runtime.GC()
	clock := e.benchStartClock(b)
	cons, err := js.Consumer(ctx, topo.RequestsStream, wire.Durable(benchPersona))
	if err != nil {
		b.Fatal(err)
	}
	// PullExpiry 1s, like the runtime's FetchMaxWait: with the 30s default a
	// pull request the server drops (seen here, rarely) stalls the loop for
	// 30s until the client notices the missing heartbeats.
	cc, err := cons.Consume(handle, jetstream.PullMaxMessages(benchSlots), jetstream.PullExpiry(time.Second))
	if err != nil {
		b.Fatal(err)
	}
	e.benchWaitEmpty(b, topo.RequestsStream, done, func() string { return fmt.Sprintf("%d of %d acked", acked.Load(), n) })
	took := clock.stop(b)

	cc.Stop()
	<-cc.Closed()
	close(work)
	workers.Wait()
	if f := failed.Load(); f > 0 {
		b.Errorf("raw loop: %d of %d acks failed", f, n)
	}
	return took
}

// benchPipelineResult is one runtime throughput run.
type benchPipelineResult struct {
	took time.Duration
	// redeliveries counts handler calls with Delivered > 1 or Attempt > 1.
	redeliveries int64
	// extra counts handler calls beyond one per message.
	extra int64
	// stop is how long Run took to return after its context was cancelled.
	stop time.Duration
}

// benchPipeline runs n pre-published requests through a personaq Runtime
// (router, decode, ledger when withLedger, classify, decide, DoubleAck,
// async outcome event) with a trivial succeeding handler, and returns the
// time from starting Run until the handler has seen n successes and the
// work-queue stream is empty. Only that part runs under the benchmark timer.
func benchPipeline(b *testing.B, e *benchEnv, n int, withLedger bool, mods ...func(*consumers.Config)) benchPipelineResult {
	b.Helper()
	b.StopTimer()
	topo := e.benchTopology(b)
	var seen, redelivered atomic.Int64
	done := make(chan struct{})
	h := handlers.Func(func(ctx context.Context, req *handlers.Request) (handlers.Result, error) {
		if d, ok := transport.DeliveryFrom(ctx); req.Attempt > 1 || (ok && d.Delivered > 1) {
			redelivered.Add(1)
		}
		if seen.Add(1) == int64(n) {
			close(done)
		}
		return handlers.Result{}, nil
	})
	cfg := consumers.Config{
		JetStream: e.benchJS(b), Topology: topo, Logger: benchLogger(), WithoutLedger: !withLedger,
		Personas: []consumers.Persona{{
			Name: benchPersona, Handler: h, Policy: benchPolicy(10 * time.Second),
			Concurrency: benchSlots, MaxReplicas: benchReplicas, AckWait: benchAckWait,
		}},
	}
	if withLedger {
		cfg.Ledger = e.benchLedger(b)
	}
	for _, mod := range mods {
		mod(&cfg)
	}
	rt, err := consumers.New(cfg)
	if err != nil {
		b.Fatal(err)
	}
	if err := rt.Provision(context.Background()); err != nil {
		b.Fatal(err)
	}
	e.benchPublish(b, topo, benchRequests(b, n))

	runtime.GC()
	clock := e.benchStartClock(b)
	run := benchStart(b, rt)
	e.benchWaitEmpty(b, topo.RequestsStream, done, func() string { return fmt.Sprintf("handler saw %d of %d", seen.Load(), n) })
	took := clock.stop(b)

	run.stop(b)
	if got := e.benchWaitCount(b, topo.OutcomesStream, uint64(n)); got != uint64(n) {
		b.Errorf("outcome events: %d stored, want %d (one per succeeded request)", got, n)
	}
	res := benchPipelineResult{took: took, redeliveries: redelivered.Load(), extra: seen.Load() - int64(n), stop: run.stopTook}
	if res.redeliveries > 0 || res.extra > 0 {
		b.Logf("runtime: %d redeliveries, %d handler calls beyond one per message", res.redeliveries, res.extra)
	}
	return res
}

func benchRate(n int, d time.Duration) float64 { return float64(n) / d.Seconds() }

// benchStorages are the two storage settings the throughput benchmarks
// run under, on the same server: File is testenv's (file storage,
// SyncAlways: every write is fsynced, DESIGN.md's R1 setting), where the
// disk bounds both loops; Memory takes the disk out, so the ratio shows the
// runtime's own cost.
var benchStorages = []struct {
	name    string
	storage jetstream.StorageType
}{{"File", jetstream.FileStorage}, {"Memory", jetstream.MemoryStorage}}

// BenchmarkPipeline measures msgs/s (b.N messages per run) of a raw
// jetstream Consume loop and of the personaq Runtime, on one in-process
// server, with the same message body and the same concurrency (64).
func BenchmarkPipeline(b *testing.B) {
	for _, st := range benchStorages {
		b.Run(st.name, func(b *testing.B) {
			e := newBenchEnv(b, true)
			e.storage = st.storage
			b.Run("Raw", func(b *testing.B) {
				b.Run("Ack", func(b *testing.B) {
					b.ReportMetric(benchRate(b.N, benchRaw(b, e, b.N, benchAck)), "msgs/s")
				})
				b.Run("DoubleAck", func(b *testing.B) {
					b.ReportMetric(benchRate(b.N, benchRaw(b, e, b.N, benchDoubleAck)), "msgs/s")
				})
			})
			b.Run("Runtime", func(b *testing.B) {
				for _, mode := range []struct {
					name   string
					ledger bool
				}{{"LedgerOff", false}, {"Ledger", true}} {
					b.Run(mode.name, func(b *testing.B) {
						r := benchPipeline(b, e, b.N, mode.ledger)
						b.ReportMetric(benchRate(b.N, r.took), "msgs/s")
						b.ReportMetric(float64(r.redeliveries), "redeliveries")
						b.ReportMetric(float64(r.stop)/float64(time.Millisecond), "stop_ms")
					})
				}
			})
		})
	}
}

// benchRatioN is how many messages each loop of BenchmarkPipelineRatio
// consumes.
const benchRatioN = 10_000

// BenchmarkPipelineRatio runs the raw loop (Ack, then DoubleAck, on a
// work-queue stream) and the Runtime (ledger off, then on, on the limits
// stream it provisions) back to back on one server, benchRatioN messages
// each, and reports the Runtime's throughput as a fraction of the raw
// loop's: ratio_ledger_off and ratio_ledger against the raw Ack loop, and
// the same against the raw DoubleAck loop, the baseline of DESIGN.md's
// targets (file storage ≥ 1.0 and ≥ 0.8; memory ≥ 0.3 and ≥ 0.15). A fifth
// loop runs the Runtime (ledger off) on a work-queue requests stream, as a
// deployment not yet migrated does, for a before/after in the same run.
func BenchmarkPipelineRatio(b *testing.B) {
	for _, st := range benchStorages {
		b.Run(st.name, func(b *testing.B) {
			e := newBenchEnv(b, true)
			e.storage = st.storage
			var raw, rawDouble, off, led, wq time.Duration
			var redeliveries int64
			onWorkQueue := func(c *consumers.Config) { e.benchWorkQueue(b, c.Topology) }
			for range b.N {
				raw += benchRaw(b, e, benchRatioN, benchAck)
				rawDouble += benchRaw(b, e, benchRatioN, benchDoubleAck)
				r := benchPipeline(b, e, benchRatioN, false)
				off, redeliveries = off+r.took, redeliveries+r.redeliveries
				r = benchPipeline(b, e, benchRatioN, true)
				led, redeliveries = led+r.took, redeliveries+r.redeliveries
				r = benchPipeline(b, e, benchRatioN, false, onWorkQueue)
				wq, redeliveries = wq+r.took, redeliveries+r.redeliveries
			}
			n := benchRatioN * b.N
			b.ReportMetric(benchRate(n, raw), "raw_ack_msgs/s")
			b.ReportMetric(benchRate(n, rawDouble), "raw_doubleack_msgs/s")
			b.ReportMetric(benchRate(n, off), "ledger_off_msgs/s")
			b.ReportMetric(benchRate(n, led), "ledger_msgs/s")
			b.ReportMetric(raw.Seconds()/off.Seconds(), "ratio_ledger_off")
			b.ReportMetric(raw.Seconds()/led.Seconds(), "ratio_ledger")
			b.ReportMetric(rawDouble.Seconds()/off.Seconds(), "ratio_ledger_off_vs_doubleack")
			b.ReportMetric(rawDouble.Seconds()/led.Seconds(), "ratio_ledger_vs_doubleack")
			// The runtime on a work-queue requests stream, as deployed before
			// the migration (confirmed acks, each a stored delete).
			b.ReportMetric(benchRate(n, wq), "workqueue_ledger_off_msgs/s")
			b.ReportMetric(rawDouble.Seconds()/wq.Seconds(), "ratio_workqueue_ledger_off_vs_doubleack")
			b.ReportMetric(float64(redeliveries), "redeliveries")
		})
	}
}

// BenchmarkPipelineFsyncs counts, with strace on a nats-server process
// (R1, file storage, sync_interval always), the fsyncs the server makes per
// request while the raw work-queue DoubleAck loop, the runtime on a
// work-queue requests stream and the runtime on its limits stream consume
// benchRatioN requests (ledger off): a figure the machine's load does not
// move, unlike msgs/s.
//
//	go test -run='^$' -bench='^BenchmarkPipelineFsyncs$' -benchtime=1x ./consumers/
func BenchmarkPipelineFsyncs(b *testing.B) {
	s := startStraceNATS(b)
	nc, err := nats.Connect(s.url)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		b.Fatal(err)
	}
	e := &benchEnv{js: js, url: s.url}
	count := func(run func()) float64 {
		before := s.fsyncs(b)
		run()
		return float64(s.fsyncs(b)-before) / benchRatioN
	}
	onWorkQueue := func(c *consumers.Config) { e.benchWorkQueue(b, c.Topology) }
	var raw, wq, lim float64
	for range b.N {
		raw += count(func() { benchRaw(b, e, benchRatioN, benchDoubleAck) })
		wq += count(func() { benchPipeline(b, e, benchRatioN, false, onWorkQueue) })
		lim += count(func() { benchPipeline(b, e, benchRatioN, false) })
	}
	b.ReportMetric(raw/float64(b.N), "raw_workqueue_doubleack_fsyncs/req")
	b.ReportMetric(wq/float64(b.N), "runtime_workqueue_fsyncs/req")
	b.ReportMetric(lim/float64(b.N), "runtime_limits_fsyncs/req")
}

// benchLatenessDelay is the delay the failing first attempt asks for.
const benchLatenessDelay = 200 * time.Millisecond

var errBenchFlaky = errors.New("bench: flaky on the first attempt")

// BenchmarkRedeliveryLateness measures how late a NakWithDelay'd message
// comes back: every request fails its first attempt with
// handlers.After(200ms, err) and succeeds on the second. Per message,
// lateness = second attempt's handler start − (NakWithDelay sent + 200ms).
//
//   - Burst/pending=1000: DESIGN.md's bound. 1000 requests published before
//     the runtime starts, Concurrency = MaxAckPending = 1000, so all of them
//     are pending at once and fail (and come back) together.
//   - Burst/pending=4000: above the server's 1024-pending threshold.
//   - Steady/rate=50 and rate=500: requests published one every 20ms (3s)
//     or every 2ms (4s) while the runtime runs (Concurrency = MaxAckPending
//     = 1000), so NakWithDelay reaches the server continuously, as in a
//     busy deployment: 20ms apart, and 2ms apart (more often than the 10ms
//     to which nats-server v2.15.2 pushes its redelivery timer on every
//     NakWithDelay, consumer.go processNak).
//   - BurstLedger/pending=200 and pending=1000: the bursts with the
//     runtime's Redis ledger, whose Begin scripts queue on Redis's one
//     thread; the retry's message comes back early and its attempt waits
//     for its due time (ontime.go), so lateness is measured against the
//     due time, and arrival_* can be negative.
//
// Each case runs a raw jetstream loop (NakWithDelay the first delivery, ack
// the second, in the Consume callback) and the runtime on the same server,
// so the broker's own lateness is visible next to the runtime's.
//
// Metrics: lateness_* (nak sent → handler start); arrival_* (nak sent →
// redelivery reaches the client: the broker's share); e2e_* (handler
// returned → next handler start: what a persona author sees). In ms.
func BenchmarkRedeliveryLateness(b *testing.B) {
	for _, st := range benchStorages {
		for _, c := range []benchLatenessCase{
			{name: "Burst/pending=200", n: 200, slots: 1000},
			{name: "Burst/pending=1000", n: 1000, slots: 1000},
			{name: "Burst/pending=4000", n: 4000, slots: 4000},
			{name: "Steady/rate=50", n: 150, slots: 1000, every: 20 * time.Millisecond},
			{name: "Steady/rate=500", n: 2000, slots: 1000, every: 2 * time.Millisecond},
			// With the ledger: Begin's scripts queue on Redis's one
			// thread, and the retry's lead (ontime.go) takes them off its start.
			{name: "BurstLedger/pending=200", n: 200, slots: 1000, ledger: true},
			{name: "BurstLedger/pending=1000", n: 1000, slots: 1000, ledger: true},
		} {
			b.Run(st.name+"/"+c.name, func(b *testing.B) {
				e := newBenchEnv(b, c.ledger)
				e.storage = st.storage
				benchLatenessCompare(b, e, c)
			})
		}
	}
}

// benchLatenessCompare runs case c with the raw loop, then the runtime.
func benchLatenessCompare(b *testing.B, e *benchEnv, c benchLatenessCase) {
	b.Run("Raw", func(b *testing.B) {
		var lateness []time.Duration
		for range b.N {
			lateness = append(lateness, benchLatenessRaw(b, e, c)...)
		}
		benchReportLateness(b, "lateness", lateness, true)
	})
	b.Run("Runtime", func(b *testing.B) {
		var lateness, arrival, e2e []time.Duration
		for range b.N {
			l, a, x := benchLatenessRound(b, e, c)
			lateness, arrival, e2e = append(lateness, l...), append(arrival, a...), append(e2e, x...)
		}
		benchReportLateness(b, "lateness", lateness, true)
		benchReportLateness(b, "arrival", arrival, false)
		benchReportLateness(b, "e2e", e2e, false)
	})
}

// benchReportLateness reports the p50 and p99 of ds (and max and min when
// full) as <name>_p50_ms etc.
func benchReportLateness(b *testing.B, name string, ds []time.Duration, full bool) {
	ds = benchSorted(ds)
	b.ReportMetric(benchPercentile(ds, 0.50), name+"_p50_ms")
	b.ReportMetric(benchPercentile(ds, 0.99), name+"_p99_ms")
	if full {
		b.ReportMetric(benchPercentile(ds, 1), name+"_max_ms")
		b.ReportMetric(benchPercentile(ds, 0), name+"_min_ms")
	}
}

// benchLatenessRaw is benchLatenessRound with a raw jetstream Consume loop
// instead of the runtime: the callback NakWithDelays a first delivery and
// acks a second, so its lateness is the broker's and client's floor.
func benchLatenessRaw(b *testing.B, e *benchEnv, c benchLatenessCase) []time.Duration {
	b.Helper()
	b.StopTimer()
	ctx := context.Background()
	topo := e.benchTopology(b)
	spec := consumers.ConsumerSpec{Persona: benchPersona, AckWait: benchAckWait, MaxAckPending: c.slots}
	if err := consumers.Provision(ctx, e.js, topo, []consumers.ConsumerSpec{spec}); err != nil {
		b.Fatal(err)
	}
	msgs := benchRequests(b, c.n)
	if c.every == 0 {
		e.benchPublish(b, topo, msgs)
	}
	var nakAt, second sync.Map // stream seq → time.Time
	var ok atomic.Int64
	done := make(chan struct{})
	handle := func(m jetstream.Msg) {
		now := time.Now()
		md, err := m.Metadata()
		if err != nil {
			b.Errorf("raw loop: %v", err)
			return
		}
		if md.NumDelivered == 1 {
			nakAt.Store(md.Sequence.Stream, time.Now())
			_ = m.NakWithDelay(benchLatenessDelay)
			return
		}
		if _, dup := second.LoadOrStore(md.Sequence.Stream, now); !dup && ok.Add(1) == int64(c.n) {
			close(done)
		}
		_ = m.Ack()
	}
	cons, err := e.nats.JetStream(b).Consumer(ctx, topo.RequestsStream, wire.Durable(benchPersona))
	if err != nil {
		b.Fatal(err)
	}

	runtime.GC()
	b.StartTimer()
	cc, err := cons.Consume(handle, jetstream.PullMaxMessages(c.slots), jetstream.PullExpiry(time.Second))
	if err != nil {
		b.Fatal(err)
	}
	if c.every > 0 {
		tick := time.NewTicker(c.every)
		for _, m := range msgs {
			<-tick.C
			e.benchPublishOne(b, topo, m)
		}
		tick.Stop()
	}
	e.benchWaitEmpty(b, topo.RequestsStream, done, func() string { return fmt.Sprintf("%d of %d second deliveries", ok.Load(), c.n) })
	b.StopTimer()
	cc.Stop()
	<-cc.Closed()

	var lateness []time.Duration
	second.Range(func(k, v any) bool {
		nak, found := nakAt.Load(k)
		if !found {
			b.Errorf("stream seq %v: second delivery without a recorded nak", k)
			return true
		}
		lateness = append(lateness, v.(time.Time).Sub(nak.(time.Time).Add(benchLatenessDelay)))
		return true
	})
	return lateness
}

// benchLatenessCase is one shape of BenchmarkRedeliveryLateness.
type benchLatenessCase struct {
	name   string
	n      int           // requests
	slots  int           // Persona.Concurrency = MaxAckPending (MaxReplicas 1)
	every  time.Duration // publish one request per interval while running; 0: all before
	ledger bool          // the runtime has a Redis ledger (the raw loop never has)
}

// benchLatenessRound runs c.n requests through one fail-then-succeed cycle
// on a fresh runtime and returns their lateness, arrival lateness and
// end-to-end lateness.
func benchLatenessRound(b *testing.B, e *benchEnv, c benchLatenessCase) (lateness, arrival, e2e []time.Duration) {
	b.Helper()
	b.StopTimer()
	topo := e.benchTopology(b)
	clock := &benchNakClock{}
	var returned, second sync.Map // stream seq → time.Time
	var ok, beyond atomic.Int64
	done := make(chan struct{})
	h := handlers.Func(func(ctx context.Context, req *handlers.Request) (handlers.Result, error) {
		now := time.Now()
		d, _ := transport.DeliveryFrom(ctx)
		switch req.Attempt {
		case 1:
			returned.Store(d.Sequence, time.Now())
			return handlers.Result{}, handlers.After(benchLatenessDelay, errBenchFlaky)
		case 2:
			if _, dup := second.LoadOrStore(d.Sequence, now); !dup && ok.Add(1) == int64(c.n) {
				close(done)
			}
		default:
			beyond.Add(1)
		}
		return handlers.Result{}, nil
	})
	cfg := consumers.Config{
		WithoutLedger: !c.ledger, JetStream: benchNakJS{JetStream: e.nats.JetStream(b), clock: clock}, Topology: topo, Logger: benchLogger(),
		Personas: []consumers.Persona{{
			Name: benchPersona, Handler: h, Policy: benchPolicy(10 * time.Second),
			Concurrency: c.slots, MaxReplicas: 1, AckWait: benchAckWait,
		}},
	}
	if c.ledger {
		cfg.Ledger = e.benchLedger(b)
	}
	rt, err := consumers.New(cfg)
	if err != nil {
		b.Fatal(err)
	}
	if err := rt.Provision(context.Background()); err != nil {
		b.Fatal(err)
	}
	msgs := benchRequests(b, c.n)
	if c.every == 0 {
		e.benchPublish(b, topo, msgs)
	}

	runtime.GC()
	b.StartTimer()
	run := benchStart(b, rt)
	if c.every > 0 {
		tick := time.NewTicker(c.every)
		for _, m := range msgs {
			<-tick.C
			e.benchPublishOne(b, topo, m)
		}
		tick.Stop()
	}
	e.benchWaitEmpty(b, topo.RequestsStream, done, func() string { return fmt.Sprintf("%d of %d second attempts", ok.Load(), c.n) })
	b.StopTimer()
	run.stop(b)
	if n := beyond.Load(); n > 0 {
		b.Errorf("%d calls beyond attempt 2 (an attempt failed that should not have, or a message was redelivered)", n)
	}

	second.Range(func(k, v any) bool {
		at := v.(time.Time)
		nak, ok1 := clock.nakAt.Load(k)
		ret, ok2 := returned.Load(k)
		arr, ok3 := clock.arrived.Load(k)
		if !ok2 || !ok3 {
			b.Errorf("stream seq %v: second attempt without a recorded first return or arrival", k)
			return true
		}
		// A delay up to transport.Config.HoldUnder is served by holding the
		// message and sending a plain Nak when due: no NakWithDelay is sent,
		// so lateness counts from the handler's return (the stricter clock).
		if !ok1 {
			nak = ret
		}
		due := nak.(time.Time).Add(benchLatenessDelay)
		lateness = append(lateness, at.Sub(due))
		arrival = append(arrival, arr.(time.Time).Sub(due))
		e2e = append(e2e, at.Sub(ret.(time.Time).Add(benchLatenessDelay)))
		return true
	})
	return lateness, arrival, e2e
}

// benchSlowAckWait is the consumer AckWait of the in-flight runs: short,
// so the attempts outlive it several times and only heartbeats
// (InProgress every AckWait/3) keep them from being redelivered.
const benchSlowAckWait = 2 * time.Second

// benchSlowHold is how long every attempt stays blocked after the last one
// started: three AckWaits.
const benchSlowHold = 3 * benchSlowAckWait

// benchSteadyHold is BenchmarkSlowInFlightSteady's hold: long enough for
// the garbage of the heartbeats to bring the heap to the collector's goal
// several times over, as in a replica that holds its attempts for minutes.
const benchSteadyHold = 15 * benchSlowAckWait

// BenchmarkSlowInFlight holds n slow requests in flight at once on one
// replica (Concurrency n, MaxReplicas 1, AckWait 2s, attempt timeout 2 min),
// n = 5000 (the figure) and 10000 (DESIGN.md's), under both
// storages: every handler blocks until all n have started and then for
// benchSlowHold more. It reports the process's memory at the peak (this
// process also runs the in-process nats-server): peak_rss_MB (VmRSS),
// rss_delta_MB (over the idle process with the messages already stored),
// heap_MB (HeapInuse+StackInuse) and stack_MB, and two ways a message
// could run twice: redeliveries (handler calls with Delivered > 1 or
// Attempt > 1, during the whole run, including the burst of acks after the
// release) and second_replica_msgs (distinct messages a second client
// pulling from the same durable received during the hold). Both must be 0;
// they are logged, not failed, so the memory figures are still reported.
func BenchmarkSlowInFlight(b *testing.B) {
	for _, st := range benchStorages {
		for _, n := range []int{5000, 10000} {
			b.Run(fmt.Sprintf("%s/inflight=%d", st.name, n), func(b *testing.B) {
				e := newBenchEnv(b, false)
				e.storage = st.storage
				benchSlow(b, e, n, benchSlowHold)
			})
		}
	}
	// As a replica is deployed: nats-server in a process of its own, so
	// peak_rss_MB is the runtime's alone and server_peak_rss_MB the server's.
	for _, n := range []int{5000, 10000} {
		b.Run(fmt.Sprintf("FileServerApart/inflight=%d", n), func(b *testing.B) {
			e := &benchEnv{nats: testenv.StartNATSProcess(b), storage: jetstream.FileStorage}
			e.js = e.nats.JetStream(b)
			benchSlow(b, e, n, benchSlowHold)
			b.ReportMetric(float64(e.nats.PeakRSS())/benchMB, "server_peak_rss_MB")
		})
	}
}

// BenchmarkSlowInFlightSteady is BenchmarkSlowInFlight's File case with
// 10,000 in flight held for 30 s instead of 6 s. In 6 s the heap may not
// reach the collector's goal; held longer, the heartbeats' garbage (10,000
// InProgress every AckWait/3, and the server's work on each) brings it
// there again and again, so the peak is the steady state's: about the
// goal (gc_goal_MB: live heap plus, at GOGC=100, as much again as the live
// heap and the stacks) plus the stacks. live_heap_MB is the heap after a
// collection at the end of the hold: what the replica and its in-process
// server really keep.
//
//	go test -run='^$' -bench='^BenchmarkSlowInFlightSteady$' -benchtime=1x ./consumers/
//
// FileServerApart is the same with nats-server in a process of its own, as
// a replica is deployed: peak_rss_MB and rss_delta_MB are then the
// replica's alone (deployments/CAPACITY.md sizes replicas by it).
func BenchmarkSlowInFlightSteady(b *testing.B) {
	b.Run("File", func(b *testing.B) {
		e := newBenchEnv(b, false)
		e.storage = jetstream.FileStorage
		benchSlow(b, e, 10_000, benchSteadyHold)
	})
	b.Run("FileServerApart", func(b *testing.B) {
		e := &benchEnv{nats: testenv.StartNATSProcess(b), storage: jetstream.FileStorage}
		e.js = e.nats.JetStream(b)
		benchSlow(b, e, 10_000, benchSteadyHold)
		b.ReportMetric(float64(e.nats.PeakRSS())/benchMB, "server_peak_rss_MB")
	})
}

// benchSlow runs b.N rounds of n slow requests, each held hold after the
// last one started, and reports the worst.
func benchSlow(b *testing.B, e *benchEnv, n int, hold time.Duration) {
	var worst benchSlowResult
	for range b.N {
		worst = worst.max(benchSlowRound(b, e, n, hold))
	}
	b.ReportMetric(float64(worst.peak.rss)/benchMB, "peak_rss_MB")
	b.ReportMetric(float64(worst.peak.rss-min(worst.base.rss, worst.peak.rss))/benchMB, "rss_delta_MB")
	b.ReportMetric(float64(worst.peak.heap)/benchMB, "heap_MB")
	b.ReportMetric(float64(worst.peak.heap-min(worst.base.heap, worst.peak.heap))/benchMB, "heap_delta_MB")
	b.ReportMetric(float64(worst.peak.stack)/benchMB, "stack_MB")
	b.ReportMetric(float64(worst.goroutines), "goroutines")
	b.ReportMetric(float64(worst.startAll)/float64(time.Millisecond), "start_all_ms")
	b.ReportMetric(float64(worst.redeliveries), "redeliveries")
	b.ReportMetric(float64(worst.stolen), "second_replica_msgs")
	b.ReportMetric(float64(worst.live)/benchMB, "live_heap_MB")
	b.ReportMetric(float64(worst.goal)/benchMB, "gc_goal_MB")
}

type benchSlowResult struct {
	base, peak   benchMem
	goroutines   int
	startAll     time.Duration // Run started → all n handlers running
	redeliveries int64
	stolen       int64
	// live is the heap after a collection at the end of the hold, goal
	// the collector's goal just before it (MemStats.NextGC).
	live, goal uint64
}

func (r benchSlowResult) max(o benchSlowResult) benchSlowResult {
	if o.peak.rss > r.peak.rss {
		r.base, r.peak = o.base, o.peak
	}
	r.goroutines = max(r.goroutines, o.goroutines)
	r.startAll = max(r.startAll, o.startAll)
	r.redeliveries += o.redeliveries
	r.stolen += o.stolen
	r.live, r.goal = max(r.live, o.live), max(r.goal, o.goal)
	return r
}

// benchLiveHeap returns the collector's goal, then the heap a collection
// leaves: what is really kept, apart from the garbage a peak also holds.
func benchLiveHeap() (live, goal uint64) {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	goal = ms.NextGC
	runtime.GC()
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc, goal
}

func benchSample() benchMem {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return benchMem{heap: ms.HeapInuse + ms.StackInuse, stack: ms.StackInuse, rss: benchRSS()}
}

func benchSlowRound(b *testing.B, e *benchEnv, n int, holdFor time.Duration) benchSlowResult {
	b.Helper()
	b.StopTimer()
	topo := e.benchTopology(b)
	var started, finished, redelivered atomic.Int64
	allStarted, allDone, release := make(chan struct{}), make(chan struct{}), make(chan struct{})
	h := handlers.Func(func(ctx context.Context, req *handlers.Request) (handlers.Result, error) {
		d, _ := transport.DeliveryFrom(ctx)
		if d.Delivered > 1 || req.Attempt > 1 {
			redelivered.Add(1)
		} else if started.Add(1) == int64(n) {
			close(allStarted)
		}
		select {
		case <-release:
		case <-ctx.Done():
			return handlers.Result{}, ctx.Err()
		}
		if finished.Add(1) == int64(n) {
			close(allDone)
		}
		return handlers.Result{}, nil
	})
	rt, err := consumers.New(consumers.Config{
		WithoutLedger: true, JetStream: e.nats.JetStream(b), Topology: topo, Logger: benchLogger(),
		Personas: []consumers.Persona{{
			Name: benchPersona, Handler: h, Policy: benchPolicy(2 * time.Minute),
			Concurrency: n, MaxReplicas: 1, AckWait: benchSlowAckWait,
		}},
	})
	if err != nil {
		b.Fatal(err)
	}
	if err := rt.Provision(context.Background()); err != nil {
		b.Fatal(err)
	}
	e.benchPublish(b, topo, benchRequests(b, n))

	runtime.GC()
	debug.FreeOSMemory()
	res := benchSlowResult{base: benchSample()}
	b.StartTimer()
	start := time.Now()
	run := benchStart(b, rt)
	select {
	case <-allStarted:
	case <-time.After(benchDeadline):
		b.Fatalf("only %d of %d attempts started after %s", started.Load(), n, benchDeadline)
	}
	res.startAll = time.Since(start)
	res.peak, res.goroutines = benchSample(), runtime.NumGoroutine()
	benchHeapProfile(b)

	// Every message is now held by the runtime. A second client pulling
	// from the same durable gets a message only if its AckWait expired,
	// i.e. if heartbeats failed to keep it.
	witness := benchWitness(b, e, topo)
	hold := time.NewTimer(holdFor)
	tick := time.NewTicker(250 * time.Millisecond)
sampling:
	for {
		select {
		case <-tick.C:
			s := benchSample()
			res.peak.rss, res.peak.heap, res.peak.stack = max(res.peak.rss, s.rss), max(res.peak.heap, s.heap), max(res.peak.stack, s.stack)
		case <-hold.C:
			break sampling
		}
	}
	tick.Stop()
	res.live, res.goal = benchLiveHeap()
	res.stolen = witness()
	close(release)
	e.benchWaitEmpty(b, topo.RequestsStream, allDone, func() string { return fmt.Sprintf("%d of %d finished", finished.Load(), n) })
	b.StopTimer()
	run.stop(b)
	res.redeliveries = redelivered.Load()
	if res.redeliveries > 0 || res.stolen > 0 {
		// Logged, not failed, so the memory figures are still reported;
		// BENCHMARKS.md marks the target failed.
		b.Logf("SPURIOUS REDELIVERIES with %d in flight: %d to the runtime, %d to a second client (started all in %s)", n, res.redeliveries, res.stolen, res.startAll)
	}
	return res
}

// benchWitness pulls from the persona's durable on its own connection,
// like a second replica, until the returned stop is called; stop returns
// how many distinct messages it received. It never acks them.
func benchWitness(b *testing.B, e *benchEnv, topo wire.Topology) (stop func() int64) {
	b.Helper()
	cons, err := e.nats.JetStream(b).Consumer(context.Background(), topo.RequestsStream, wire.Durable(benchPersona))
	if err != nil {
		b.Fatal(err)
	}
	quit, finished := make(chan struct{}), make(chan struct{})
	seen := map[uint64]bool{}
	go func() {
		defer close(finished)
		for {
			select {
			case <-quit:
				return
			default:
			}
			batch, err := cons.Fetch(64, jetstream.FetchMaxWait(200*time.Millisecond))
			if err != nil {
				b.Logf("witness: fetch: %v", err)
				time.Sleep(50 * time.Millisecond) // do not spin on a broken connection
				continue
			}
			for m := range batch.Messages() {
				if md, err := m.Metadata(); err == nil {
					seen[md.Sequence.Stream] = true
				}
			}
		}
	}()
	return func() int64 {
		close(quit)
		<-finished
		return int64(len(seen))
	}
}

// benchHeapProfile writes a heap profile to $PERSONAQ_BENCH_HEAPPROFILE, if
// set: what the runtime holds per message in flight, at the peak.
func benchHeapProfile(b *testing.B) {
	path := os.Getenv("PERSONAQ_BENCH_HEAPPROFILE")
	if path == "" {
		return
	}
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	runtime.GC()
	if err := pprof.WriteHeapProfile(f); err != nil {
		b.Fatal(err)
	}
}
