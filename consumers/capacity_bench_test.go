package consumers_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/redis/go-redis/v9"

	"github.com/personaq/personaq/consumers"
	"github.com/personaq/personaq/consumers/ledger"
	"github.com/personaq/personaq/handlers"
)

// The capacity benchmarks measure what deployments/CAPACITY.md needs and
// BENCHMARKS.md does not have: bytes per stored request, terminal record,
// quarantine record and attempt events; Redis CPU and memory per attempt and
// per task-step; nats-server CPU per request and the request rate of an R1
// and an R3 JetStream under each sync setting.

// capacityMix is the workload of BenchmarkCapacityFootprint: of every ten
// requests, one is terminal (quarantined), two fail once and succeed on the
// second attempt, seven succeed at once; successes answer capacityOutput.
const capacityMixRequests = 2000

var capacityOutput = []byte(`{"summary":"` + strings.Repeat("x", 1000) + `"}`)

// BenchmarkCapacityFootprint runs the runtime with the Redis ledger (file
// storage, R1, SyncAlways) over capacityMixRequests requests and reports
// per-request storage and Redis costs.
//
//	go test -run='^$' -bench='^BenchmarkCapacityFootprint$' -benchtime=1x -count=1 ./consumers/
func BenchmarkCapacityFootprint(b *testing.B) {
	for range b.N {
		benchCapacityFootprint(b)
	}
}

func benchCapacityFootprint(b *testing.B) {
	e := newBenchEnv(b, true)
	topo := e.benchTopology(b)
	ctx := context.Background()
	rc := e.redis.Client(b)
	const prefix = "capacity"
	led, err := ledger.New(ledger.Config{Client: rc, Prefix: prefix})
	if err != nil {
		b.Fatal(err)
	}
	var calls, done atomic.Int64
	finished := make(chan struct{})
	var once sync.Once
	h := handlers.Func(func(ctx context.Context, req *handlers.Request) (handlers.Result, error) {
		calls.Add(1)
		i, _ := strconv.Atoi(strings.TrimPrefix(req.Message.TaskID, "bench-task-"))
		end := func() {
			if done.Add(1) == capacityMixRequests {
				once.Do(func() { close(finished) })
			}
		}
		switch {
		case i%10 == 0:
			end()
			return handlers.Result{}, handlers.Terminal(errors.New("the prompt is malformed: a 60-byte error text like a real one"))
		case i%10 <= 2 && req.Attempt == 1:
			return handlers.Result{}, handlers.After(10*time.Millisecond, errors.New("upstream 529 overloaded, retry later"))
		}
		end()
		return handlers.Result{Output: capacityOutput}, nil
	})
	rt, err := consumers.New(consumers.Config{
		JetStream: e.nats.JetStream(b), Topology: topo, Logger: benchLogger(), Ledger: led,
		Personas: []consumers.Persona{{
			Name: benchPersona, Handler: h, Policy: benchPolicy(10 * time.Second),
			Concurrency: benchSlots, MaxReplicas: benchReplicas, AckWait: benchAckWait,
		}},
	})
	if err != nil {
		b.Fatal(err)
	}
	if err := rt.Provision(ctx); err != nil {
		b.Fatal(err)
	}
	e.benchPublish(b, topo, benchRequests(b, capacityMixRequests))
	reqBytes := benchStreamBytes(b, e.js, topo.RequestsStream)

	memBefore := benchRedisUsedMemory(b, rc)
	redisCPU0, procCPU0 := benchPIDCPU(b, e.redis.PID()), benchSelfCPU()
	stats0 := benchRedisCommandUsec(b, rc)
	run := benchStart(b, rt)
	e.benchWaitEmpty(b, topo.RequestsStream, finished, func() string { return fmt.Sprintf("%d of %d done", done.Load(), capacityMixRequests) })
	redisCPU, procCPU := benchPIDCPU(b, e.redis.PID())-redisCPU0, benchSelfCPU()-procCPU0
	stats := benchRedisCommandUsec(b, rc) - stats0
	run.stop(b)
	memAfter := benchRedisUsedMemory(b, rc)

	n := float64(capacityMixRequests)
	attempts := float64(calls.Load())
	out := benchStreamBytes(b, e.js, topo.OutcomesStream)
	q := benchStreamBytes(b, e.js, topo.QuarantineStream)
	att := benchStreamBytes(b, e.js, topo.AttemptsStream)
	kv := benchStreamBytes(b, e.js, "KV_personaq_quarantine_index")
	b.ReportMetric(reqBytes.per(), "B/stored-request")
	b.ReportMetric(out.per(), "B/terminal-record")
	b.ReportMetric(q.per(), "B/quarantine-record")
	b.ReportMetric(float64(att.bytes)/n, "B-attempt-events/request")
	b.ReportMetric(float64(att.msgs)/n, "attempt-events/request")
	b.ReportMetric(kv.per(), "B/quarantine-index-entry")
	b.ReportMetric(attempts/n, "attempts/request")
	b.ReportMetric(float64(redisCPU.Microseconds())/attempts, "redis-cpu-µs/attempt")
	b.ReportMetric(float64(stats)/attempts, "redis-cmd-µs/attempt")
	b.ReportMetric(float64(procCPU.Microseconds())/n, "process-cpu-µs/request")
	b.ReportMetric(float64(memAfter-memBefore)/n, "redis-B/step")
	for _, c := range []struct {
		name string
		task int
	}{{"succeeded", 3}, {"retried", 1}, {"quarantined", 10}} {
		b.ReportMetric(float64(benchStepMemory(b, rc, prefix, c.task)), "redis-B/"+c.name+"-step")
	}
}

// benchStepMemory is MEMORY USAGE summed over every key of task i's step.
func benchStepMemory(b *testing.B, rc *redis.Client, prefix string, i int) int64 {
	b.Helper()
	ctx := context.Background()
	keys, err := rc.Keys(ctx, fmt.Sprintf("%s:{bench-task-%08d}*", prefix, i)).Result()
	if err != nil || len(keys) == 0 {
		b.Fatalf("keys of task %d: %v %v", i, keys, err)
	}
	var sum int64
	for _, k := range keys {
		n, err := rc.MemoryUsage(ctx, k).Result()
		if err != nil {
			b.Fatalf("memory usage %s: %v", k, err)
		}
		sum += n
	}
	return sum
}

// benchBytes is a stream's size.
type benchBytes struct{ bytes, msgs uint64 }

func (s benchBytes) per() float64 {
	if s.msgs == 0 {
		return 0
	}
	return float64(s.bytes) / float64(s.msgs)
}

func benchStreamBytes(b *testing.B, js jetstream.JetStream, stream string) benchBytes {
	b.Helper()
	s, err := js.Stream(context.Background(), stream)
	if err != nil {
		b.Fatalf("stream %s: %v", stream, err)
	}
	info, err := s.Info(context.Background())
	if err != nil {
		b.Fatalf("stream %s: %v", stream, err)
	}
	return benchBytes{bytes: info.State.Bytes, msgs: info.State.Msgs}
}

// benchRedisUsedMemory is INFO memory's used_memory.
func benchRedisUsedMemory(b *testing.B, rc *redis.Client) int64 {
	b.Helper()
	return benchInfoField(b, rc, "memory", "used_memory:")
}

// benchRedisCommandUsec sums the usec of every command in INFO
// commandstats: the time Redis spent executing them.
func benchRedisCommandUsec(b *testing.B, rc *redis.Client) int64 {
	b.Helper()
	info, err := rc.Info(context.Background(), "commandstats").Result()
	if err != nil {
		b.Fatal(err)
	}
	var sum int64
	for _, line := range strings.Split(info, "\n") {
		_, rest, ok := strings.Cut(line, ",usec=")
		if !ok {
			continue
		}
		v, _, _ := strings.Cut(rest, ",")
		n, _ := strconv.ParseInt(v, 10, 64)
		sum += n
	}
	return sum
}

func benchInfoField(b *testing.B, rc *redis.Client, section, field string) int64 {
	b.Helper()
	info, err := rc.Info(context.Background(), section).Result()
	if err != nil {
		b.Fatal(err)
	}
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), field); ok {
			n, _ := strconv.ParseInt(v, 10, 64)
			return n
		}
	}
	b.Fatalf("INFO %s has no %s", section, field)
	return 0
}

// benchPIDCPU is the user + system CPU time of process pid (from
// /proc/<pid>/stat, in clock ticks of 10 ms).
func benchPIDCPU(b *testing.B, pid int) time.Duration {
	b.Helper()
	raw, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		b.Fatalf("cpu of %d: %v", pid, err)
	}
	// Fields after the command name (which may hold spaces): state is 3,
	// utime 14 and stime 15.
	f := strings.Fields(string(raw[strings.LastIndexByte(string(raw), ')')+2:]))
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(ut+st) * 10 * time.Millisecond
}

// benchSelfCPU is this process's user + system CPU time.
func benchSelfCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// benchLoadAvg is the 1-minute load average, reported beside CPU figures.
func benchLoadAvg() float64 {
	raw, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return -1
	}
	v, _ := strconv.ParseFloat(strings.Fields(string(raw))[0], 64)
	return v
}

// BenchmarkJetStreamLifecycle is what one request costs the JetStream
// servers, without personaq's code in the way: the request is published
// (PubAck), pulled, its terminal record published (PubAck) and the request
// DoubleAck'ed — the runtime's server-side work per successful request —
// by 64 workers, on one server (R1) or a 3-server cluster (R3, streams with
// 3 replicas), with fsync on every write (SyncAlways) or nats-server's
// default. All servers run in this process: cpu-µs/request is the whole
// process (servers and client), the same client in every case, so the
// ratios between cases are the servers'.
//
//	go test -run='^$' -bench='^BenchmarkJetStreamLifecycle$' -benchtime=1x -count=3 ./consumers/
func BenchmarkJetStreamLifecycle(b *testing.B) {
	for _, c := range []struct {
		name     string
		replicas int
		sync     bool // SyncAlways
	}{
		{"R1/Sync=always", 1, true}, {"R1/Sync=default", 1, false},
		{"R3/Sync=always", 3, true}, {"R3/Sync=default", 3, false},
	} {
		b.Run(c.name, func(b *testing.B) {
			for range b.N {
				benchLifecycle(b, c.replicas, c.sync)
			}
		})
	}
}

const benchLifecycleRequests = 6000

func benchLifecycle(b *testing.B, replicas int, syncAlways bool) {
	urls := benchStartCluster(b, replicas, syncAlways)
	nc, err := nats.Connect(strings.Join(urls, ","))
	if err != nil {
		b.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	for _, cfg := range []jetstream.StreamConfig{
		{Name: "REQ", Subjects: []string{"req.>"}, Retention: jetstream.WorkQueuePolicy, Replicas: replicas},
		{Name: "OUT", Subjects: []string{"out.>"}, Replicas: replicas},
	} {
		if _, err := js.CreateStream(ctx, cfg); err != nil {
			b.Fatal(err)
		}
	}
	cons, err := js.CreateOrUpdateConsumer(ctx, "REQ", jetstream.ConsumerConfig{Durable: "w", AckPolicy: jetstream.AckExplicitPolicy, MaxAckPending: 1024})
	if err != nil {
		b.Fatal(err)
	}
	msgs := benchRequests(b, benchLifecycleRequests)
	load0, cpu0, start := benchLoadAvg(), benchSelfCPU(), time.Now()
	var next atomic.Int64
	var wg sync.WaitGroup
	errc := make(chan error, benchSlots)
	for range benchSlots {
		wg.Go(func() {
			for {
				i := next.Add(1) - 1
				if i >= benchLifecycleRequests {
					return
				}
				if err := benchOneLifecycle(ctx, js, cons, msgs[i], i); err != nil {
					errc <- err
					return
				}
			}
		})
	}
	wg.Wait()
	took, cpu := time.Since(start), benchSelfCPU()-cpu0
	close(errc)
	for err := range errc {
		b.Fatal(err)
	}
	b.ReportMetric(benchLifecycleRequests/took.Seconds(), "requests/s")
	b.ReportMetric(float64(cpu.Microseconds())/benchLifecycleRequests, "cpu-µs/request")
	b.ReportMetric(load0, "loadavg")
}

// benchOneLifecycle publishes one request, pulls one message (any: the
// workers share the consumer), publishes its terminal record and acks it.
func benchOneLifecycle(ctx context.Context, js jetstream.JetStream, cons jetstream.Consumer, m benchMsg, i int64) error {
	pub := &nats.Msg{Subject: "req.coder", Data: m.data, Header: nats.Header{}}
	pub.Header.Set(jetstream.MsgIDHeader, m.id)
	if _, err := js.PublishMsg(ctx, pub); err != nil {
		return fmt.Errorf("publish request: %w", err)
	}
	batch, err := cons.Fetch(1, jetstream.FetchMaxWait(5*time.Second))
	if err != nil {
		return fmt.Errorf("fetch: %w", err)
	}
	for msg := range batch.Messages() {
		if _, err := js.Publish(ctx, "out.succeeded."+strconv.FormatInt(i, 10), capacityOutput); err != nil {
			return fmt.Errorf("publish outcome: %w", err)
		}
		if err := msg.DoubleAck(ctx); err != nil {
			return fmt.Errorf("ack: %w", err)
		}
	}
	return batch.Error()
}

// benchStartCluster starts n in-process JetStream servers (one alone, or a
// cluster routed to each other) and returns their client URLs once
// JetStream answers.
func benchStartCluster(b *testing.B, n int, syncAlways bool) []string {
	b.Helper()
	ports := make([]int, n)
	for i := range ports {
		ports[i] = benchFreePort(b)
	}
	var urls []string
	for i := range n {
		opts := &server.Options{
			ServerName: fmt.Sprintf("s%d", i), Host: "127.0.0.1", Port: server.RANDOM_PORT,
			JetStream: true, StoreDir: b.TempDir(), SyncAlways: syncAlways, NoLog: true, NoSigs: true,
		}
		if n > 1 {
			opts.Cluster = server.ClusterOpts{Name: "bench", Host: "127.0.0.1", Port: ports[i]}
			for j, p := range ports {
				if j != i {
					opts.Routes = append(opts.Routes, server.RoutesFromStr(fmt.Sprintf("nats://127.0.0.1:%d", p))...)
				}
			}
		}
		s, err := server.NewServer(opts)
		if err != nil {
			b.Fatal(err)
		}
		s.Start()
		b.Cleanup(func() { s.Shutdown(); s.WaitForShutdown() })
		if !s.ReadyForConnections(10 * time.Second) {
			b.Fatal("server not ready")
		}
		urls = append(urls, s.ClientURL())
	}
	nc, err := nats.Connect(strings.Join(urls, ","))
	if err != nil {
		b.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_, err := js.AccountInfo(ctx)
		cancel()
		if err == nil {
			return urls
		}
		if time.Now().After(deadline) {
			b.Fatalf("jetstream not ready: %v", err)
		}
		time.Sleep(50 * time.Millisecond) //nolint:forbidigo // polling a server's readiness, not synchronising test code
	}
}

func benchFreePort(b *testing.B) int {
	b.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = l.Close() }()
	return l.Addr().(*net.TCPAddr).Port
}
