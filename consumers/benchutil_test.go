package consumers_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/personaq/personaq/consumers"
	"github.com/personaq/personaq/consumers/ledger"
	"github.com/personaq/personaq/consumers/wire"
	"github.com/personaq/personaq/integration/testenv"
	"github.com/personaq/personaq/retry"
	"github.com/personaq/personaq/schemas"
)

// This file holds the setup the benchmarks in bench_test.go share. Every
// name starts with "bench" so it cannot collide with the behaviour tests'
// helpers in the same package.

const (
	// benchPersona is the persona every benchmark serves.
	benchPersona = "coder"
	// benchSlots is the concurrency of the throughput runs: the runtime's
	// Persona.Concurrency and the raw loop's PullMaxMessages and workers.
	benchSlots = 64
	// benchReplicas sizes MaxAckPending (slots × replicas), as the runtime
	// does by default.
	benchReplicas = 4
	// benchAckWait is the consumer AckWait of the throughput runs, set
	// explicitly so the raw consumer gets exactly the runtime's config.
	benchAckWait = 30 * time.Second
	// benchDeadline bounds any wait in a benchmark; reaching it is a failure.
	benchDeadline = 3 * time.Minute
)

// benchInput is the persona input every request carries (~200 bytes, so
// the encoded request is ~500 bytes).
var benchInput = json.RawMessage(`{"prompt":"Implement the retry budget for the planner persona and add table-driven tests for linear, exponential and list schedules; keep the public API unchanged.","files":["retry/budget.go","retry/budget_test.go"]}`)

// benchEnv is one in-process JetStream server, started by
// testenv.StartNATS (R1, file storage in a temp dir, SyncAlways), and
// optionally one real redis-server, shared by every run of a benchmark so
// raw and runtime figures come from the same server. Each run gets its own
// streams (benchTopology), deleted when the run ends.
type benchEnv struct {
	nats  *testenv.NATS
	js    jetstream.JetStream // admin and publishing connection
	redis *testenv.Redis
	runs  atomic.Int64
	// storage of every stream the runs create. Default: file.
	storage jetstream.StorageType
	// url, when set, is a nats-server process the runs use instead of nats.
	url string
	// lastCPU is the CPU the last loop's measured part used (benchClock):
	// this process's, with the in-process server, and redis-server's.
	lastCPU time.Duration
}

// benchClock times the measured part of one loop: its wall time, and the
// CPU spent meanwhile by this process (the loop, with the in-process
// nats-server) and by redis-server. A loop that keeps both CPUs busy is
// bound by the work it does per request; one that leaves them idle, by
// what it waits for.
type benchClock struct {
	e     *benchEnv
	start time.Time
	cpu   time.Duration
}

// benchStartClock starts b's timer and a benchClock.
func (e *benchEnv) benchStartClock(b *testing.B) benchClock {
	b.StartTimer()
	return benchClock{e: e, start: time.Now(), cpu: e.benchCPU()}
}

// stop stops b's timer, keeps the CPU spent since the start in e.lastCPU
// and returns the wall time.
func (c benchClock) stop(b *testing.B) time.Duration {
	took := time.Since(c.start)
	c.e.lastCPU = c.e.benchCPU() - c.cpu
	b.StopTimer()
	return took
}

// benchCPU is the CPU time this process and redis-server (when running)
// have used so far.
func (e *benchEnv) benchCPU() time.Duration {
	cpu := selfCPU()
	if e.redis != nil {
		if pid := e.redis.PID(); pid != 0 {
			cpu += testenv.ProcCPU(pid)
		}
	}
	return cpu
}

// benchJS is a JetStream context on a connection of its own to the
// benchmark's server: testenv's, or the external one at e.url.
func (e *benchEnv) benchJS(b *testing.B) jetstream.JetStream {
	b.Helper()
	if e.url == "" {
		return e.nats.JetStream(b)
	}
	nc, err := nats.Connect(e.url)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		b.Fatal(err)
	}
	return js
}

func newBenchEnv(b *testing.B, withRedis bool) *benchEnv {
	b.Helper()
	n := testenv.StartNATS(b)
	e := &benchEnv{nats: n, js: n.JetStream(b)}
	if withRedis {
		e.redis = testenv.StartRedis(b)
	}
	return e
}

// benchTopology returns a topology with stream names no other run uses
// and deletes its streams when b's run ends.
func (e *benchEnv) benchTopology(b *testing.B) wire.Topology {
	b.Helper()
	k := e.runs.Add(1)
	t := wire.Topology{
		RequestsStream:   fmt.Sprintf("BENCH%d_REQUESTS", k),
		RequestsPrefix:   fmt.Sprintf("bench%d.requests", k),
		QuarantineStream: fmt.Sprintf("BENCH%d_QUARANTINE", k),
		QuarantinePrefix: fmt.Sprintf("bench%d.quarantine", k),
		OutcomesStream:   fmt.Sprintf("BENCH%d_OUTCOMES", k),
		OutcomesPrefix:   fmt.Sprintf("bench%d.outcomes", k),
		AttemptsStream:   fmt.Sprintf("BENCH%d_ATTEMPTS", k),
		AttemptsPrefix:   fmt.Sprintf("bench%d.attempts", k),
		OutputsBucket:    fmt.Sprintf("BENCH%d_OUTPUTS", k),
		Storage:          e.storage,
	}.WithDefaults()
	b.Cleanup(func() {
		for _, s := range []string{t.RequestsStream, t.QuarantineStream, t.OutcomesStream, t.AttemptsStream, "OBJ_" + t.OutputsBucket} {
			_ = e.js.DeleteStream(context.Background(), s)
		}
	})
	return t
}

// benchLedger returns a Redis ledger with a key prefix no other run uses,
// its scripts loaded so no EVALSHA falls back to EVAL while timed.
func (e *benchEnv) benchLedger(b *testing.B) consumers.Ledger {
	b.Helper()
	return e.benchRedisLedger(b)
}

// benchRedisLedger is benchLedger's ledger as its own type.
func (e *benchEnv) benchRedisLedger(b *testing.B) *ledger.Ledger {
	b.Helper()
	l, err := ledger.New(ledger.Config{Client: e.redis.Client(b), Prefix: "bench" + strconv.FormatInt(e.runs.Add(1), 10)})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	// The ledger's data set begins before the benchmark publishes, as a
	// deployed ledger's does: otherwise every message looks older than the
	// ledger's data and pays the after-a-wipe terminal-record lookup.
	if _, err := l.Epoch(ctx); err != nil {
		b.Fatal(err)
	}
	warm := ledger.StepKey{TaskID: "warm-up", Step: "main"}
	bg, err := l.Begin(ctx, warm, "warm")
	if err != nil {
		b.Fatal(err)
	}
	if err := l.Finish(ctx, warm, retry.Attempt{Number: bg.Attempt, Class: retry.ClassSucceeded}, ledger.FinishOptions{Counted: true, Succeeded: true, RequestID: "warm"}); err != nil {
		b.Fatal(err)
	}
	return l
}

// benchPolicy is the policy of the throughput and memory runs: no attempt
// ever fails, so only the timeout matters.
func benchPolicy(timeout time.Duration) retry.Policy {
	return retry.Policy{Name: "bench", MaxAttempts: 3, AttemptTimeout: timeout, Schedule: retry.Linear{Step: time.Second}}
}

// benchSpec is the consumer the runtime provisions for a persona with
// Concurrency benchSlots, MaxReplicas benchReplicas and AckWait
// benchAckWait; the raw loop consumes from exactly this consumer.
func benchSpec() consumers.ConsumerSpec {
	return consumers.ConsumerSpec{Persona: benchPersona, AckWait: benchAckWait, MaxAckPending: benchSlots * benchReplicas}
}

// benchLogger is what `personaq serve` logs with by default (JSON, info,
// timestamps), written to io.Discard: the pipeline pays for building its
// log events, not for a terminal.
func benchLogger() *zerolog.Logger {
	var w io.Writer = io.Discard // PERSONAQ_BENCH_LOG: write the runtimes' logs to this file
	if p := os.Getenv("PERSONAQ_BENCH_LOG"); p != "" {
		w, _ = os.Create(p)
	}
	l := zerolog.New(w).Level(zerolog.InfoLevel).With().Timestamp().Logger()
	return &l
}

// benchMsg is one encoded persona request and its request id (its
// Nats-Msg-Id, so it must be unique within the duplicate window).
type benchMsg struct {
	id   string
	data []byte
}

// benchRequests encodes n valid persona requests with schemas.Encode: same
// shape and size, unique request ids (UUIDs).
func benchRequests(b *testing.B, n int) []benchMsg {
	b.Helper()
	msgs := make([]benchMsg, n)
	for i := range msgs {
		req := schemas.NewRequest(fmt.Sprintf("bench-task-%08d", i), "implement", benchPersona)
		req.Agents = schemas.Agents{Primary: "claude-sonnet", Fallback: "gpt-5"}
		req.Input = benchInput
		data, err := schemas.Encode(req)
		if err != nil {
			b.Fatal(err)
		}
		msgs[i] = benchMsg{id: req.RequestID, data: data}
	}
	return msgs
}

// benchPublish stores msgs on the persona's request subject with
// PublishAsync, at most benchPublishWindow unacknowledged at a time, and
// checks the stream holds them all.
func (e *benchEnv) benchPublish(b *testing.B, topo wire.Topology, msgs []benchMsg) {
	b.Helper()
	const benchPublishWindow = 512
	subject := topo.RequestSubject(benchPersona)
	futures := make([]jetstream.PubAckFuture, 0, benchPublishWindow)
	settle := func() {
		select {
		case <-e.js.PublishAsyncComplete():
		case <-time.After(benchDeadline):
			b.Fatalf("publish: %d async publishes still pending after %s", e.js.PublishAsyncPending(), benchDeadline)
		}
		for _, f := range futures {
			select {
			case err := <-f.Err():
				b.Fatalf("publish: %v", err)
			default:
			}
		}
		futures = futures[:0]
	}
	for _, m := range msgs {
		nm := &nats.Msg{Subject: subject, Data: m.data, Header: nats.Header{}}
		nm.Header.Set(jetstream.MsgIDHeader, m.id)
		f, err := e.js.PublishMsgAsync(nm)
		if err != nil {
			b.Fatalf("publish: %v", err)
		}
		if futures = append(futures, f); len(futures) == benchPublishWindow {
			settle()
		}
	}
	settle()
	if got := e.benchStreamMsgs(b, topo.RequestsStream); got != uint64(len(msgs)) {
		b.Fatalf("publish: stream %s holds %d messages, want %d", topo.RequestsStream, got, len(msgs))
	}
}

// benchPublishOne stores m and waits for the server's acknowledgement.
func (e *benchEnv) benchPublishOne(b *testing.B, topo wire.Topology, m benchMsg) {
	b.Helper()
	nm := &nats.Msg{Subject: topo.RequestSubject(benchPersona), Data: m.data, Header: nats.Header{}}
	nm.Header.Set(jetstream.MsgIDHeader, m.id)
	if _, err := e.js.PublishMsg(context.Background(), nm); err != nil {
		b.Fatalf("publish: %v", err)
	}
}

func (e *benchEnv) benchStreamMsgs(b *testing.B, stream string) uint64 {
	b.Helper()
	s, err := e.js.Stream(context.Background(), stream)
	if err != nil {
		b.Fatalf("stream %s: %v", stream, err)
	}
	info, err := s.Info(context.Background())
	if err != nil {
		b.Fatalf("stream %s: info: %v", stream, err)
	}
	return info.State.Msgs
}

// benchUnsettled is how many messages of stream are not settled: all it
// holds for a work queue (an ack deletes), the persona consumers' pending
// and unacknowledged ones for limits retention (acked messages stay until
// trimmed).
func (e *benchEnv) benchUnsettled(b *testing.B, stream string) uint64 {
	b.Helper()
	ctx := context.Background()
	s, err := e.js.Stream(ctx, stream)
	if err != nil {
		b.Fatalf("stream %s: %v", stream, err)
	}
	if s.CachedInfo().Config.Retention != jetstream.LimitsPolicy {
		return s.CachedInfo().State.Msgs
	}
	var n uint64
	l := s.ListConsumers(ctx)
	for ci := range l.Info() {
		n += ci.NumPending + uint64(ci.NumAckPending)
	}
	if err := l.Err(); err != nil {
		b.Fatalf("stream %s: consumers: %v", stream, err)
	}
	return n
}

// benchWorkQueue creates topo's requests stream with work-queue retention,
// before Provision (which keeps a work queue it finds): the raw loop's
// stream, where each ack is a stored delete.
func (e *benchEnv) benchWorkQueue(b *testing.B, topo wire.Topology) {
	b.Helper()
	_, err := e.js.CreateStream(context.Background(), jetstream.StreamConfig{
		Name: topo.RequestsStream, Subjects: []string{topo.RequestsPrefix + ".>"}, Retention: jetstream.WorkQueuePolicy,
		Storage: topo.Storage, Replicas: topo.Replicas, Duplicates: topo.DuplicateWindow, Description: "personaq persona requests",
	})
	if err != nil {
		b.Fatal(err)
	}
}

// benchWaitEmpty waits for done (the handler or ack loop has seen every
// message), then until the requests stream has nothing unsettled (every
// ack applied on the server: a work queue empty, a limits stream's
// consumer with nothing pending).
// It polls stream info every millisecond, only in that tail.
func (e *benchEnv) benchWaitEmpty(b *testing.B, stream string, done <-chan struct{}, progress func() string) {
	b.Helper()
	deadline := time.NewTimer(benchDeadline)
	defer deadline.Stop()
	select {
	case <-done:
	case <-deadline.C:
		b.Fatalf("not done after %s: %s", benchDeadline, progress())
	}
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for e.benchUnsettled(b, stream) != 0 {
		select {
		case <-tick.C:
		case <-deadline.C:
			b.Fatalf("stream %s not settled after %s: %s", stream, benchDeadline, progress())
		}
	}
}

// benchWaitCount waits until stream holds want messages (outcome events are
// published asynchronously), or a few seconds; it returns what it found.
func (e *benchEnv) benchWaitCount(b *testing.B, stream string, want uint64) uint64 {
	b.Helper()
	deadline := time.Now().Add(10 * time.Second)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for {
		got := e.benchStreamMsgs(b, stream)
		if got >= want || time.Now().After(deadline) {
			return got
		}
		<-tick.C
	}
}

// benchRunning is a Runtime running in the background.
type benchRunning struct {
	cancel context.CancelFunc
	done   chan error
	once   sync.Once
	// stopTook is how long the last stop took (cancel → Run returned).
	stopTook time.Duration
}

// benchStart runs rt until stop (or the run's end) and returns at once.
func benchStart(b *testing.B, rt *consumers.Runtime) *benchRunning {
	b.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	r := &benchRunning{cancel: cancel, done: make(chan error, 1)}
	go func() { r.done <- rt.Run(ctx) }()
	b.Cleanup(func() { r.stop(b) })
	return r
}

// stop cancels the runtime and waits for Run to return; a runtime that
// does not stop within a minute fails the benchmark (a shutdown hang).
func (r *benchRunning) stop(b *testing.B) {
	r.once.Do(func() {
		start := time.Now()
		r.cancel()
		select {
		case err := <-r.done:
			if err != nil && !strings.Contains(err.Error(), context.Canceled.Error()) {
				b.Errorf("runtime stopped with an error: %v", err)
			}
		case <-time.After(time.Minute):
			b.Errorf("runtime did not stop within a minute of its context being cancelled")
		}
		r.stopTook = time.Since(start)
	})
}

// benchPercentile returns the q-quantile (nearest rank) of sorted, in ms.
func benchPercentile(sorted []time.Duration, q float64) float64 {
	if len(sorted) == 0 {
		return math.NaN()
	}
	i := max(int(math.Ceil(q*float64(len(sorted))))-1, 0)
	return float64(sorted[i]) / float64(time.Millisecond)
}

// benchMem is one memory sample of this process (the runtime and the
// in-process nats-server it talks to).
type benchMem struct {
	heap  uint64 // runtime.MemStats HeapInuse + StackInuse, bytes
	stack uint64 // runtime.MemStats StackInuse, bytes
	rss   uint64 // /proc/self/status VmRSS, bytes
}

// benchRSS is this process's resident set now (0 where /proc does not say).
func benchRSS() uint64 { return testenv.ProcStatus("self", "VmRSS") }

const benchMB = 1 << 20

// benchSorted returns a sorted copy of ds.
func benchSorted(ds []time.Duration) []time.Duration {
	out := slices.Clone(ds)
	slices.Sort(out)
	return out
}

// benchNakClock timestamps, per stream sequence, when the runtime sent a
// NakWithDelay and when the redelivery reached the client. It sees the
// runtime's messages through benchNakJS, a JetStream client whose
// consumers hand out wrapped messages; nothing else changes.
type benchNakClock struct {
	nakAt   sync.Map // uint64 stream seq → time.Time: NakWithDelay about to be sent
	arrived sync.Map // uint64 stream seq → time.Time: first redelivery in the client
}

type benchNakJS struct {
	jetstream.JetStream
	clock *benchNakClock
}

func (j benchNakJS) Consumer(ctx context.Context, stream, name string) (jetstream.Consumer, error) {
	c, err := j.JetStream.Consumer(ctx, stream, name)
	if err != nil {
		return nil, err
	}
	return benchNakConsumer{Consumer: c, clock: j.clock}, nil
}

type benchNakConsumer struct {
	jetstream.Consumer
	clock *benchNakClock
}

// Fetch relays the batch, wrapping each message (one extra channel hop).
func (c benchNakConsumer) Fetch(n int, opts ...jetstream.FetchOpt) (jetstream.MessageBatch, error) {
	batch, err := c.Consumer.Fetch(n, opts...)
	if err != nil {
		return nil, err
	}
	out := &benchNakBatch{MessageBatch: batch, ch: make(chan jetstream.Msg, n)}
	go func() {
		defer close(out.ch)
		for m := range batch.Messages() {
			if md, err := m.Metadata(); err == nil && md.NumDelivered > 1 {
				c.clock.arrived.LoadOrStore(md.Sequence.Stream, time.Now())
			}
			out.ch <- benchNakMsg{Msg: m, clock: c.clock}
		}
	}()
	return out, nil
}

type benchNakBatch struct {
	jetstream.MessageBatch
	ch chan jetstream.Msg
}

func (b *benchNakBatch) Messages() <-chan jetstream.Msg { return b.ch }

type benchNakMsg struct {
	jetstream.Msg
	clock *benchNakClock
}

func (m benchNakMsg) NakWithDelay(d time.Duration) error {
	if md, err := m.Metadata(); err == nil {
		m.clock.nakAt.LoadOrStore(md.Sequence.Stream, time.Now())
	}
	return m.Msg.NakWithDelay(d)
}
