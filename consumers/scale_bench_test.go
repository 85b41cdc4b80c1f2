package consumers_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/personaq/personaq/consumers/wire"
	"github.com/personaq/personaq/integration/testenv"
	"github.com/personaq/personaq/schemas"
)

// Scale-out and failover of `personaq serve` replicas running as separate
// processes (the binary is built from ./cmd/personaq) against one
// in-process nats-server (R1, file storage) and one real redis-server,
// everything on 127.0.0.1. Each benchmark runs under two file-store sync
// settings: Sync=always (every write fsynced; what testenv and the compose
// files use) and Sync=default (nats-server's 2-minute interval). The
// persona is an `http` invoker whose endpoint is served by this process:
// it waits 50 ms (an I/O-bound persona) or answers at once (no-op). Run one
// sync setting and case at a time (each well under 3 minutes), e.g.
//
//	go test -run='^$' -bench='^BenchmarkScaleOut$/^Sync=default$/^Wait50ms$' -benchtime=1x -count=3 ./consumers/
//	go test -run='^$' -bench='^BenchmarkFailover$' -benchtime=1x -count=3 ./consumers/
//
// Cases: Wait50ms (16 slots per replica, the default), Wait50msSlots4 (4
// slots: 3 replicas then use a fraction of a 2-vCPU machine) and NoOp (16
// slots). max_replicas 4 sizes MaxAckPending to 4 × slots, enough for 3
// replicas. A run starts the replicas, waits for their /readyz, pauses the
// persona's consumer, publishes the whole backlog, resumes it and times
// until the last request's outcome event. It also reports the CPU time
// each request cost: in the replica processes, and in this process (the
// nats-server, the endpoint and the outcome subscriber).

const (
	scalePersona = "bench"
	// scaleSlots is the replicas' concurrency (the default) in the
	// failover run and the main scale-out case.
	scaleSlots = 16
	// scaleAckWait is the consumer AckWait of the failover run (the
	// failover target is AckWait + 1s).
	scaleAckWait  = 2 * time.Second
	scaleDeadline = 2 * time.Minute
	// scaleBinaryEnv names a personaq binary to run instead of building
	// ./cmd/personaq.
	scaleBinaryEnv = "PERSONAQ_BENCH_BINARY"
)

// scaleEnv is the server pair and the personaq binary a benchmark shares.
type scaleEnv struct {
	nats   *server.Server
	redis  *testenv.Redis
	nc     *nats.Conn
	js     jetstream.JetStream
	binary string
	sync   string // "always" or "default" (the server's 2-minute interval)
	runs   atomic.Int64
}

// scaleSyncs are the file-store sync settings a benchmark runs under:
// always (every write fsynced, as testenv and our compose files run) and
// nats-server's default (fsync every 2 minutes).
var scaleSyncs = []string{"always", "default"}

// newScaleEnv starts a JetStream server like testenv.StartNATS (R1, file
// storage in a temp dir, 127.0.0.1) with the given sync setting, and a
// redis-server.
func newScaleEnv(b *testing.B, binary, sync string) *scaleEnv {
	b.Helper()
	opts := &server.Options{
		Host: "127.0.0.1", Port: server.RANDOM_PORT, JetStream: true, StoreDir: b.TempDir(),
		NoLog: true, NoSigs: true, SyncAlways: sync == "always",
	}
	ns, err := server.NewServer(opts)
	if err != nil {
		b.Fatal(err)
	}
	ns.Start()
	if !ns.ReadyForConnections(10 * time.Second) {
		b.Fatal("nats-server not ready after 10s")
	}
	b.Cleanup(func() {
		ns.Shutdown()
		ns.WaitForShutdown()
	})
	e := &scaleEnv{nats: ns, redis: testenv.StartRedis(b), binary: binary, sync: sync}
	if e.nc, err = nats.Connect(ns.ClientURL()); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(e.nc.Close)
	if e.js, err = jetstream.New(e.nc); err != nil {
		b.Fatal(err)
	}
	return e
}

// scaleBinary builds ./cmd/personaq once per benchmark (or returns
// $PERSONAQ_BENCH_BINARY).
func scaleBinary(b *testing.B) string {
	b.Helper()
	if bin := os.Getenv(scaleBinaryEnv); bin != "" {
		return bin
	}
	bin := filepath.Join(b.TempDir(), "personaq")
	build := exec.Command("go", "build", "-o", bin, "github.com/personaq/personaq/cmd/personaq")
	if out, err := build.CombinedOutput(); err != nil {
		b.Fatalf("go build personaq: %v\n%s", err, out)
	}
	return bin
}

// scaleRun is one measurement: its own streams, ledger prefix and
// outcome counter.
type scaleRun struct {
	e    *scaleEnv
	k    int64
	dir  string
	topo wire.Topology

	mu       sync.Mutex
	outcomes map[string]time.Time // request id → when its succeeded event arrived
	others   int                  // outcome events other than succeeded
	all      chan struct{}        // closed when want outcomes arrived
	want     int
}

func (e *scaleEnv) newRun(b *testing.B) *scaleRun {
	b.Helper()
	k := e.runs.Add(1)
	r := &scaleRun{e: e, k: k, dir: b.TempDir(), outcomes: map[string]time.Time{}, all: make(chan struct{})}
	r.topo = wire.Topology{
		RequestsStream: fmt.Sprintf("SCALE%d_REQUESTS", k), RequestsPrefix: fmt.Sprintf("scale%d.requests", k),
		QuarantineStream: fmt.Sprintf("SCALE%d_QUARANTINE", k), QuarantinePrefix: fmt.Sprintf("scale%d.quarantine", k),
		OutcomesStream: fmt.Sprintf("SCALE%d_OUTCOMES", k), OutcomesPrefix: fmt.Sprintf("scale%d.outcomes", k),
	}.WithDefaults()
	sub, err := e.nc.Subscribe(r.topo.OutcomesPrefix+".>", func(m *nats.Msg) {
		ev, err := schemas.DecodeOutcome(m.Data)
		now := time.Now()
		r.mu.Lock()
		defer r.mu.Unlock()
		if err != nil || ev.Outcome != schemas.OutcomeSucceeded {
			r.others++
			return
		}
		if _, dup := r.outcomes[ev.RequestID]; !dup {
			r.outcomes[ev.RequestID] = now
			if len(r.outcomes) == r.want {
				close(r.all)
			}
		}
	})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		_ = sub.Unsubscribe()
		for _, s := range []string{r.topo.RequestsStream, r.topo.QuarantineStream, r.topo.OutcomesStream} {
			_ = e.js.DeleteStream(context.Background(), s)
		}
	})
	return r
}

// config writes a replica's configuration calling url and returns its path.
func (r *scaleRun) config(b *testing.B, name, url string, slots int, ackWait time.Duration) string {
	b.Helper()
	ack := ""
	if ackWait > 0 {
		ack = fmt.Sprintf("    ack_wait: %s\n", ackWait)
	}
	t := r.topo
	yaml := fmt.Sprintf(`nats:
  urls: [%s]
redis:
  url: %s
  prefix: scale%d
topology:
  requests_stream: %s
  requests_prefix: %s
  quarantine_stream: %s
  quarantine_prefix: %s
  outcomes_stream: %s
  outcomes_prefix: %s
runtime:
  drain_timeout: 5s
personas:
  %s:
    invoker: {type: http, url: %q}
    timeout: 5s
    policy:
      preset: persona
      schedule: {type: fixed, every: 100ms}
    concurrency: %d
    max_replicas: 4
%s`, r.e.nats.ClientURL(), r.e.redis.URL(), r.k, t.RequestsStream, t.RequestsPrefix, t.QuarantineStream,
		t.QuarantinePrefix, t.OutcomesStream, t.OutcomesPrefix, scalePersona, url, slots, ack)
	path := filepath.Join(r.dir, name+".yaml")
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		b.Fatal(err)
	}
	return path
}

// scaleEndpoint is the persona's HTTP endpoint: it waits work, then
// answers 200. It records which request ids it started and finished.
type scaleEndpoint struct {
	url  string
	srv  *http.Server
	work time.Duration

	mu       sync.Mutex
	started  map[string]time.Time // first start of each request id
	finished map[string]time.Time
	attempts map[string][]string // request id → X-Personaq-Attempt of each call
}

func newScaleEndpoint(b *testing.B, work time.Duration) *scaleEndpoint {
	b.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	ep := &scaleEndpoint{url: "http://" + ln.Addr().String() + "/persona", work: work,
		started: map[string]time.Time{}, finished: map[string]time.Time{}, attempts: map[string][]string{}}
	ep.srv = &http.Server{Handler: ep, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = ep.srv.Serve(ln) }()
	b.Cleanup(func() { _ = ep.srv.Close() })
	return ep
}

func (ep *scaleEndpoint) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	_, _ = io.Copy(io.Discard, r.Body)
	id := r.Header.Get("X-Correlation-ID")
	ep.mu.Lock()
	if _, ok := ep.started[id]; !ok {
		ep.started[id] = time.Now()
	}
	ep.attempts[id] = append(ep.attempts[id], r.Header.Get("X-Personaq-Attempt"))
	ep.mu.Unlock()
	if ep.work > 0 {
		t := time.NewTimer(ep.work)
		select {
		case <-t.C:
		case <-r.Context().Done():
			t.Stop()
			return
		}
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = io.WriteString(w, `{"ok":true}`)
	ep.mu.Lock()
	ep.finished[id] = time.Now()
	ep.mu.Unlock()
}

func (ep *scaleEndpoint) startedIDs() map[string]time.Time {
	ep.mu.Lock()
	defer ep.mu.Unlock()
	out := make(map[string]time.Time, len(ep.started))
	for id, t := range ep.started {
		out[id] = t
	}
	return out
}

// firstStarted is when the endpoint received its first request.
func (ep *scaleEndpoint) firstStarted() time.Time {
	ep.mu.Lock()
	defer ep.mu.Unlock()
	var first time.Time
	for _, t := range ep.started {
		if first.IsZero() || t.Before(first) {
			first = t
		}
	}
	return first
}

func (ep *scaleEndpoint) finishedCount() int {
	ep.mu.Lock()
	defer ep.mu.Unlock()
	return len(ep.finished)
}

// scaleReplica is one `personaq serve` process.
type scaleReplica struct {
	name    string
	cmd     *exec.Cmd
	metrics string
	logPath string
	exited  chan struct{}
}

// startReplica runs `personaq serve --config cfg --metrics-addr …`.
func (e *scaleEnv) startReplica(b *testing.B, name, cfg string) *scaleReplica {
	b.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	logPath := cfg + "." + name + ".log"
	logFile, err := os.Create(logPath)
	if err != nil {
		b.Fatal(err)
	}
	cmd := exec.Command(e.binary, "--log-level", "warn", "--log-format", "json",
		"serve", "--config", cfg, "--metrics-addr", addr)
	cmd.Env = scaleEnviron()
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	r := &scaleReplica{name: name, cmd: cmd, metrics: addr, logPath: logPath, exited: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		_ = logFile.Close()
		close(r.exited)
	}()
	b.Cleanup(func() { r.signal(syscall.SIGKILL) })
	return r
}

// scaleEnviron is this process's environment without the variables that
// would override the replica's configuration file.
func scaleEnviron() []string {
	return slices.DeleteFunc(os.Environ(), func(kv string) bool {
		return strings.HasPrefix(kv, "PERSONAQ_") || strings.HasPrefix(kv, "NATS_URL=") ||
			strings.HasPrefix(kv, "REDIS_URL=") || strings.HasPrefix(kv, "PERSONA_TIMEOUTS_JSON=")
	})
}

// waitReady polls the replica's /readyz until it answers 200.
func (r *scaleReplica) waitReady(b *testing.B) {
	b.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get("http://" + r.metrics + "/readyz")
		if err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		select {
		case <-r.exited:
			b.Fatalf("replica %s exited before it was ready:\n%s", r.name, readTail(r.logPath))
		default:
		}
		if time.Now().After(deadline) {
			b.Fatalf("replica %s not ready after 30s:\n%s", r.name, readTail(r.logPath))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// signal sends sig and waits for the process to exit (a minute at most).
func (r *scaleReplica) signal(sig syscall.Signal) {
	select {
	case <-r.exited:
		return
	default:
	}
	_ = r.cmd.Process.Signal(sig)
	select {
	case <-r.exited:
	case <-time.After(time.Minute):
		_ = r.cmd.Process.Kill()
		<-r.exited
	}
}

// scrapeMeans reads the replica's /metrics and returns the mean of the
// handler, ledger and in-flight series, for -v runs.
func (r *scaleReplica) scrapeMeans(b *testing.B) string {
	b.Helper()
	resp, err := http.Get("http://" + r.metrics + "/metrics")
	if err != nil {
		return err.Error()
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	vals := map[string]float64{}
	for line := range strings.Lines(string(raw)) {
		f := strings.Fields(line)
		if len(f) == 2 && strings.HasPrefix(f[0], "personaq_") {
			var v float64
			_, _ = fmt.Sscan(f[1], &v)
			vals[f[0]] = v
		}
	}
	mean := func(name, labels string) string {
		c := vals[name+"_count"+labels]
		if c == 0 {
			return "-"
		}
		return fmt.Sprintf("%.2fms", vals[name+"_sum"+labels]/c*1000)
	}
	return fmt.Sprintf("handler %s, ledger begin %s, ledger finish %s",
		mean("personaq_handler_duration_seconds", `{persona="bench"}`),
		mean("personaq_ledger_round_trip_seconds", `{op="begin"}`), mean("personaq_ledger_round_trip_seconds", `{op="finish"}`))
}

func readTail(path string) string {
	raw, _ := os.ReadFile(path)
	if len(raw) > 4000 {
		raw = raw[len(raw)-4000:]
	}
	return string(raw)
}

// publish pauses the persona's consumer (it exists: replicas are ready),
// stores n requests and returns their stream sequences by request id.
func (r *scaleRun) publish(b *testing.B, n int) map[string]uint64 {
	b.Helper()
	ctx := context.Background()
	if _, err := r.e.js.PauseConsumer(ctx, r.topo.RequestsStream, wire.Durable(scalePersona), time.Now().Add(time.Hour)); err != nil {
		b.Fatalf("pause: %v", err)
	}
	r.mu.Lock()
	r.want = n
	r.mu.Unlock()
	type pending struct {
		id string
		f  jetstream.PubAckFuture
	}
	seqs := make(map[string]uint64, n)
	window := make([]pending, 0, 256)
	settle := func() {
		for _, p := range window {
			select {
			case ack := <-p.f.Ok():
				seqs[p.id] = ack.Sequence
			case err := <-p.f.Err():
				b.Fatalf("publish: %v", err)
			case <-time.After(scaleDeadline):
				b.Fatal("publish: no ack")
			}
		}
		window = window[:0]
	}
	for i := range n {
		req := schemas.NewRequest(fmt.Sprintf("scale-%d-%06d", r.k, i), "main", scalePersona)
		data, err := schemas.Encode(req)
		if err != nil {
			b.Fatal(err)
		}
		m := &nats.Msg{Subject: r.topo.RequestSubject(scalePersona), Data: data, Header: nats.Header{}}
		m.Header.Set(jetstream.MsgIDHeader, req.RequestID)
		f, err := r.e.js.PublishMsgAsync(m)
		if err != nil {
			b.Fatalf("publish: %v", err)
		}
		if window = append(window, pending{req.RequestID, f}); len(window) == cap(window) {
			settle()
		}
	}
	settle()
	return seqs
}

// resume lets the replicas start on the backlog and returns when it did.
func (r *scaleRun) resume(b *testing.B) time.Time {
	b.Helper()
	start := time.Now()
	if _, err := r.e.js.ResumeConsumer(context.Background(), r.topo.RequestsStream, wire.Durable(scalePersona)); err != nil {
		b.Fatalf("resume: %v", err)
	}
	return start
}

// waitAll waits for every outcome and for the work-queue stream to be
// empty; it returns when the last outcome arrived.
func (r *scaleRun) waitAll(b *testing.B) time.Time {
	b.Helper()
	select {
	case <-r.all:
	case <-time.After(scaleDeadline):
		r.mu.Lock()
		got, others := len(r.outcomes), r.others
		r.mu.Unlock()
		b.Fatalf("%d of %d succeeded outcomes (%d other outcomes) after %s", got, r.want, others, scaleDeadline)
	}
	var last time.Time
	r.mu.Lock()
	for _, t := range r.outcomes {
		if t.After(last) {
			last = t
		}
	}
	others := r.others
	r.mu.Unlock()
	if others != 0 {
		b.Errorf("%d outcomes other than succeeded", others)
	}
	r.waitEmpty(b)
	return last
}

func (r *scaleRun) waitEmpty(b *testing.B) {
	b.Helper()
	deadline := time.Now().Add(scaleDeadline)
	for {
		info, err := r.e.js.Stream(context.Background(), r.topo.RequestsStream)
		if err != nil {
			b.Fatal(err)
		}
		if info.CachedInfo().State.Msgs == 0 {
			return
		}
		if time.Now().After(deadline) {
			b.Fatalf("stream %s still holds %d messages", r.topo.RequestsStream, info.CachedInfo().State.Msgs)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// scaleCase is one persona shape a scale-out run measures.
type scaleCase struct {
	name       string
	work       time.Duration // the endpoint's wait per request
	slots      int           // concurrency per replica
	perReplica int           // requests per replica: the backlog grows with N
}

// scaleResult is one throughput run.
type scaleResult struct {
	tput       float64 // requests per second, resume → last outcome
	steady     float64 // requests per second, first handler start → last outcome
	firstStart float64 // ms from resume to the first handler start
	replicaCPU float64 // CPU ms per request, all replica processes (user+sys)
	benchCPU   float64 // CPU ms per request, this process: nats-server, endpoint, publisher
}

// throughput runs n requests through replicas `personaq serve` processes.
func (e *scaleEnv) throughput(b *testing.B, c scaleCase, replicas int) scaleResult {
	b.Helper()
	n := c.perReplica * replicas
	run := e.newRun(b)
	ep := newScaleEndpoint(b, c.work)
	cfg := run.config(b, "replica", ep.url, c.slots, 0)
	reps := make([]*scaleReplica, replicas)
	for i := range reps {
		reps[i] = e.startReplica(b, fmt.Sprintf("r%d", i+1), cfg)
	}
	for _, r := range reps {
		r.waitReady(b)
	}
	run.publish(b, n)
	cpu0 := selfCPU()
	start := run.resume(b)
	last := run.waitAll(b)
	bench := selfCPU() - cpu0
	if testing.Verbose() {
		b.Logf("replica r1 /metrics: %s", reps[0].scrapeMeans(b))
	}
	var replicaCPU time.Duration
	for _, r := range reps {
		r.signal(syscall.SIGTERM)
		replicaCPU += r.cmd.ProcessState.UserTime() + r.cmd.ProcessState.SystemTime()
	}
	if got := ep.finishedCount(); got < n {
		b.Errorf("endpoint finished %d of %d requests", got, n)
	}
	perReq := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) / float64(n) }
	first := ep.firstStarted()
	return scaleResult{tput: float64(n) / last.Sub(start).Seconds(), replicaCPU: perReq(replicaCPU), benchCPU: perReq(bench),
		steady: float64(n) / last.Sub(first).Seconds(), firstStart: float64(first.Sub(start)) / float64(time.Millisecond)}
}

// selfCPU is this process's user+system CPU time so far.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkScaleOut measures aggregate throughput of 1, 2 and 3 replica
// processes for a persona that waits 50 ms (with the default 16 slots per
// replica, and with 4 slots so that 3 replicas stay far from this
// machine's CPU limit) and for a no-op persona, and reports efficiency =
// throughput(N) / (N × throughput(1)) and the CPU each request costs.
func BenchmarkScaleOut(b *testing.B) {
	bin := scaleBinary(b)
	b.Logf("GOMAXPROCS=%d NumCPU=%d; nats-server in process (R1, file storage)", runtime.GOMAXPROCS(0), runtime.NumCPU())
	for _, sync := range scaleSyncs {
		b.Run("Sync="+sync, func(b *testing.B) {
			e := newScaleEnv(b, bin, sync)
			for _, c := range []scaleCase{
				{"Wait50ms", 50 * time.Millisecond, 16, 1500},
				{"Wait50msSlots4", 50 * time.Millisecond, 4, 400},
				{"NoOp", 0, 16, 2000},
			} {
				b.Run(c.name, func(b *testing.B) { e.scaleOut(b, c) })
			}
		})
	}
}

func (e *scaleEnv) scaleOut(b *testing.B, c scaleCase) {
	var one float64
	for replicas := 1; replicas <= 3; replicas++ {
		b.Run(fmt.Sprintf("Replicas=%d", replicas), func(b *testing.B) {
			var res scaleResult
			for range b.N {
				res = e.throughput(b, c, replicas)
			}
			if replicas == 1 {
				one = res.tput
			}
			b.ReportMetric(res.tput, "req/s")
			b.ReportMetric(res.steady, "steady_req/s")
			b.ReportMetric(res.firstStart, "first_start_ms")
			b.ReportMetric(res.replicaCPU, "replica-cpu-ms/req")
			b.ReportMetric(res.benchCPU, "server-cpu-ms/req")
			b.ReportMetric(0, "ns/op")
			if one > 0 {
				eff := res.tput / (float64(replicas) * one)
				b.ReportMetric(eff, "efficiency")
				b.Logf("sync %s, %s: %d replica(s) × %d slots, %d requests: %.0f req/s, efficiency %.2f; CPU per request: replicas %.2f ms, nats-server+bench %.2f ms",
					e.sync, c.name, replicas, c.slots, c.perReplica*replicas, res.tput, eff, res.replicaCPU, res.benchCPU)
			}
		})
	}
}

// BenchmarkFailover runs two replica processes with their own endpoints
// (so the bench knows which replica holds which request) on a backlog of
// 50 ms requests, SIGKILLs replica A mid-run, and measures, for every
// request A held (started at A's endpoint, still unacknowledged in the
// work-queue stream once A is gone), the time from the kill until it is
// acknowledged by B. Target: ≤ AckWait + 1s, AckWait = 2s.
func BenchmarkFailover(b *testing.B) {
	bin := scaleBinary(b)
	for _, sync := range scaleSyncs {
		b.Run("Sync="+sync, func(b *testing.B) {
			e := newScaleEnv(b, bin, sync)
			for range b.N {
				e.failover(b)
			}
		})
	}
}

func (e *scaleEnv) failover(b *testing.B) {
	const n = 2000
	run := e.newRun(b)
	epA, epB := newScaleEndpoint(b, 50*time.Millisecond), newScaleEndpoint(b, 50*time.Millisecond)
	a := e.startReplica(b, "A", run.config(b, "A", epA.url, scaleSlots, scaleAckWait))
	bb := e.startReplica(b, "B", run.config(b, "B", epB.url, scaleSlots, scaleAckWait))
	a.waitReady(b)
	bb.waitReady(b)
	seqs := run.publish(b, n)
	run.resume(b)
	for epA.finishedCount() < 300 { // A is in steady state, every slot busy
		time.Sleep(time.Millisecond)
	}
	killed := time.Now()
	a.signal(syscall.SIGKILL)
	reaped := time.Now()

	// A's messages: started at A and still in the stream now that A is gone.
	stream, err := e.js.Stream(context.Background(), run.topo.RequestsStream)
	if err != nil {
		b.Fatal(err)
	}
	held := map[string]uint64{}
	for id := range epA.startedIDs() {
		if inStream(b, stream, seqs[id]) {
			held[id] = seqs[id]
		}
	}
	if len(held) == 0 {
		b.Fatal("replica A held no unacknowledged request when killed")
	}
	done := map[string]time.Duration{}
	deadline := time.Now().Add(scaleDeadline)
	for len(done) < len(held) {
		for id, seq := range held {
			if _, ok := done[id]; !ok && !inStream(b, stream, seq) {
				done[id] = time.Since(killed)
			}
		}
		if time.Now().After(deadline) {
			b.Fatalf("%d of A's %d requests still unacknowledged after %s", len(held)-len(done), len(held), scaleDeadline)
		}
		time.Sleep(2 * time.Millisecond)
	}
	times := make([]time.Duration, 0, len(done))
	for _, d := range done {
		times = append(times, d)
	}
	slices.Sort(times)
	// Where A's requests went: B's endpoint ran them, with which attempt.
	startedB := epB.startedIDs()
	var firstAtB time.Duration = -1
	attempts := map[string]int{}
	rerun := 0
	epB.mu.Lock()
	for id := range held {
		t, ok := startedB[id]
		if !ok {
			continue // A recorded its success in the ledger: B acks without re-running
		}
		rerun++
		if firstAtB < 0 || t.Sub(killed) < firstAtB {
			firstAtB = t.Sub(killed)
		}
		for _, at := range epB.attempts[id] {
			attempts["attempt "+at]++
		}
	}
	epB.mu.Unlock()
	lost := e.failoverTail(b, run, n)
	reached := epA.startedIDs()
	for id, t := range epB.startedIDs() {
		reached[id] = t
	}
	for id := range seqs {
		if _, ok := reached[id]; !ok {
			b.Errorf("request %s never reached an endpoint", id)
		}
	}

	worst := times[len(times)-1]
	b.ReportMetric(worst.Seconds(), "failover-max-s")
	b.ReportMetric(times[len(times)/2].Seconds(), "failover-p50-s")
	b.ReportMetric(float64(len(held)), "held-by-A")
	b.ReportMetric(0, "ns/op")
	b.Logf("sync %s, AckWait %s; A held %d unacknowledged requests at SIGKILL (reaped %s after); B re-ran %d of them (%v), "+
		"acked %d without re-running (A had recorded their success in the ledger); first restart on B after %s; "+
		"all acknowledged after p50 %s, max %s (target ≤ %s); succeeded outcome events missing: %d of %d",
		e.sync, scaleAckWait, len(held), reaped.Sub(killed).Round(time.Microsecond), rerun, attempts, len(held)-rerun,
		firstAtB.Round(time.Millisecond), times[len(times)/2].Round(time.Millisecond), worst.Round(time.Millisecond),
		scaleAckWait+time.Second, lost, n)
	if worst > scaleAckWait+time.Second {
		b.Errorf("failover took %s, over AckWait + 1s = %s", worst, scaleAckWait+time.Second)
	}
	bb.signal(syscall.SIGTERM)
}

// failoverTail waits until the stream is empty (nothing lost) and returns
// how many requests have no outcome event (A acked them but died before
// publishing the event, which is asynchronous).
func (e *scaleEnv) failoverTail(b *testing.B, run *scaleRun, n int) int {
	b.Helper()
	run.waitEmpty(b)
	time.Sleep(200 * time.Millisecond) // outcome events are published after the ack
	run.mu.Lock()
	defer run.mu.Unlock()
	return n - len(run.outcomes)
}

func inStream(b *testing.B, s jetstream.Stream, seq uint64) bool {
	b.Helper()
	_, err := s.GetMsg(context.Background(), seq)
	switch {
	case err == nil:
		return true
	case errors.Is(err, jetstream.ErrMsgNotFound):
		return false
	}
	b.Fatalf("get message %d: %v", seq, err)
	return false
}
