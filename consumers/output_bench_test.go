package consumers_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/personaq/personaq/consumers"
	"github.com/personaq/personaq/consumers/client"
	"github.com/personaq/personaq/consumers/wire"
	"github.com/personaq/personaq/handlers"
	"github.com/personaq/personaq/schemas"
)

const (
	// benchLiveRequests run at once, on one replica with as many slots.
	benchLiveRequests = 1000
	// benchLiveChunks is what each request's persona writes: one write
	// every benchLiveGap, longer than the writer's 25 ms flush, so each
	// write is one chunk (a model streaming tokens in bursts).
	benchLiveChunks = 100
	benchLiveGap    = 30 * time.Millisecond
)

// BenchmarkLiveOutput: benchLiveRequests concurrent requests whose persona
// writes benchLiveChunks pieces of live output each, followed by as many
// Go callers (client.OnOutput), through one replica and one in-process
// server (file storage, sync always, for the requests and records; the
// output stream is memory). Reported: chunk latency from the persona's
// write to the caller's callback (p50, p99; it includes the writer's
// coalescing window of up to 25 ms), CPU of this process (replica, server
// and callers) per chunk over the same requests without live output, and
// the throughput of streaming requests against those requests.
//
//	go test -run '^$' -bench BenchmarkLiveOutput -benchtime 1x -timeout 10m ./consumers/
func BenchmarkLiveOutput(b *testing.B) {
	e := newBenchEnv(b, false)
	for range b.N {
		plain := benchLive(b, e, false)
		live := benchLive(b, e, true)
		chunks := float64(live.chunks)
		if live.chunks != benchLiveRequests*benchLiveChunks {
			b.Fatalf("callers got %d chunks, want %d", live.chunks, benchLiveRequests*benchLiveChunks)
		}
		lat := benchSorted(live.latencies)
		b.ReportMetric(benchPercentile(lat, 0.50), "chunk-p50-ms")
		b.ReportMetric(benchPercentile(lat, 0.99), "chunk-p99-ms")
		b.ReportMetric(float64(live.cpu-plain.cpu)/float64(time.Microsecond)/chunks, "cpu-us/chunk")
		b.ReportMetric(plain.rate, "plain-req/s")
		b.ReportMetric(live.rate, "live-req/s")
		b.ReportMetric(live.rate/plain.rate, "throughput-ratio")
		b.ReportMetric(benchLoadAvg(), "loadavg")
	}
}

// benchLiveRun is what one run measured.
type benchLiveRun struct {
	rate      float64 // requests per second, first submit to last record
	cpu       time.Duration
	chunks    int
	latencies []time.Duration
}

func benchLive(b *testing.B, e *benchEnv, stream bool) benchLiveRun {
	b.Helper()
	topo := e.benchTopology(b)
	topo.Output = wire.OutputTopology{Stream: topo.RequestsStream + "_OUTPUT", Prefix: strings.TrimSuffix(topo.RequestsPrefix, ".requests") + ".output"}
	topo = topo.WithDefaults()
	b.Cleanup(func() { _ = e.js.DeleteStream(context.Background(), topo.Output.Stream) })
	persona := handlers.Func(func(ctx context.Context, _ *handlers.Request) (handlers.Result, error) {
		w := handlers.OutputWriter(ctx)
		var buf []byte
		for range benchLiveChunks {
			if stream {
				buf = strconv.AppendInt(buf[:0], time.Now().UnixNano(), 10)
				_, _ = w.Write(append(buf, '\n'))
			}
			time.Sleep(benchLiveGap)
		}
		return handlers.Result{Output: []byte(`"done"`)}, nil
	})
	rt, err := consumers.New(consumers.Config{JetStream: e.js, Topology: topo, WithoutLedger: true, Logger: benchLogger(),
		Personas: []consumers.Persona{{Name: benchPersona, Handler: persona, Policy: benchPolicy(time.Minute),
			Concurrency: benchLiveRequests, MaxReplicas: 1}}})
	if err != nil {
		b.Fatal(err)
	}
	if err := rt.Provision(context.Background()); err != nil {
		b.Fatal(err)
	}
	benchStart(b, rt)
	c, err := client.New(client.Config{JetStream: e.nats.JetStream(b), Topology: topo})
	if err != nil {
		b.Fatal(err)
	}
	var (
		mu     sync.Mutex
		out    benchLiveRun
		failed atomic.Int64
		wg     sync.WaitGroup
	)
	ctx, cancel := context.WithTimeout(context.Background(), benchDeadline)
	defer cancel()
	cpu0, start := benchSelfCPU(), time.Now()
	for i := range benchLiveRequests {
		wg.Go(func() {
			var lat []time.Duration
			var opts []client.AwaitOption
			if stream {
				opts = append(opts, client.OnOutput(func(ch *schemas.OutputChunk) {
					now := time.Now().UnixNano()
					for line := range strings.Lines(ch.Data) {
						if t, err := strconv.ParseInt(strings.TrimSpace(line), 10, 64); err == nil {
							lat = append(lat, time.Duration(now-t))
						}
					}
				}))
			}
			req := schemas.NewRequest(fmt.Sprintf("live-%d", i), "main", benchPersona)
			req.Input = benchInput
			if _, err := c.Submit(ctx, req, client.SkipPersonaCheck()); err != nil {
				failed.Add(1)
				return
			}
			if _, err := c.Await(ctx, req.RequestID, opts...); err != nil {
				failed.Add(1)
				return
			}
			mu.Lock()
			out.latencies = append(out.latencies, lat...)
			out.chunks += len(lat)
			mu.Unlock()
		})
	}
	wg.Wait()
	took := time.Since(start)
	out.cpu = benchSelfCPU() - cpu0
	out.rate = benchLiveRequests / took.Seconds()
	if n := failed.Load(); n > 0 {
		b.Fatalf("%d requests failed", n)
	}
	if stream {
		b.Logf("%d writes published as %d chunk messages (finals included)", benchLiveRequests*benchLiveChunks, e.benchStreamMsgs(b, topo.Output.Stream))
	}
	return out
}
