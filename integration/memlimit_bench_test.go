//go:build integration

package integration

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/personaq/personaq/integration/containers"
)

// BenchmarkReplicaSlowInFlightContainer holds 10,000 slow requests on one
// replica in a container with a memory limit, as a replica is deployed
// (NATS and Redis in containers of their own), for 30 s: the persona never
// answers within the hold, and AckWait is 2 s, so only heartbeats keep the
// requests. With --memory-limit-ratio 0.9 (the default) the replica's Go
// soft memory limit is 90 % of the container's; with 0 there is none, and
// the heap grows to about twice what is live between collections.
//
//	make images
//	go test -tags integration -run='^$' -bench='^BenchmarkReplicaSlowInFlightContainer$' -benchtime=1x -timeout 30m ./integration/
//
// peak_anon_MB is the largest of the cgroup's own memory (rss on cgroup
// v1, anon on v2) sampled every 250 ms, the figure comparable to a
// process's RSS; peak_usage_MB adds the page cache (the cgroup's max_usage
// on v1). oom_killed is 1 when the kernel killed the replica;
// handlers_run_twice counts deliveries beyond one per request; cpu_s is the
// replica's CPU time from its start to the end of the hold.
func BenchmarkReplicaSlowInFlightContainer(b *testing.B) {
	const mb = 1_000_000
	for _, limit := range []struct {
		name  string
		bytes int64
	}{{"160MB", 160 * mb}, {"128MiB", 128 << 20}} {
		for _, ratio := range []string{"0.9", "0"} {
			b.Run(fmt.Sprintf("limit=%s/ratio=%s", limit.name, ratio), func(b *testing.B) {
				var worst slowContainerRun
				for range b.N {
					worst = worst.max(runSlowInContainer(b, limit.bytes, ratio, benchSlowN, 30*time.Second))
				}
				b.ReportMetric(float64(worst.peakAnon)/mb, "peak_anon_MB")
				b.ReportMetric(float64(worst.peakUsage)/mb, "peak_usage_MB")
				b.ReportMetric(float64(worst.oomKilled), "oom_killed")
				b.ReportMetric(float64(worst.twice), "handlers_run_twice")
				b.ReportMetric(worst.startAll.Seconds(), "start_all_s")
				b.ReportMetric(worst.cpu.Seconds(), "cpu_s")
			})
		}
	}
}

// benchSlowN is how many requests BenchmarkReplicaSlowInFlightContainer
// holds at once.
const benchSlowN = 10_000

type slowContainerRun struct {
	peakAnon, peakUsage uint64
	oomKilled, twice    int
	startAll, cpu       time.Duration
}

func (r slowContainerRun) max(o slowContainerRun) slowContainerRun {
	return slowContainerRun{
		peakAnon: max(r.peakAnon, o.peakAnon), peakUsage: max(r.peakUsage, o.peakUsage),
		oomKilled: r.oomKilled + o.oomKilled, twice: r.twice + o.twice, startAll: max(r.startAll, o.startAll),
		cpu: max(r.cpu, o.cpu),
	}
}

// holdPersona never answers within the hold (demo slowpoke, 10 min
// timeout); AckWait 2 s, so only heartbeats keep its requests.
func holdPersona(n int) string {
	return fmt.Sprintf(`  hold:
    invoker: {type: demo, demo: slowpoke}
    timeout: 10m
    ack_wait: 2s
    concurrency: %d
    max_replicas: 1
    policy: %s
`, n, fast)
}

func runSlowInContainer(b *testing.B, limit int64, ratio string, n int, hold time.Duration) slowContainerRun {
	b.StopTimer()
	e := newEnv(b)
	r, err := e.startReplica("hold", replicaConfig(holdPersona(n)), func(o *containers.ReplicaOptions) {
		o.Memory, o.Args = limit, []string{"--memory-limit-ratio", ratio}
	})
	if err != nil {
		b.Fatal(err)
	}
	probe, err := r.ProbeURL(e.ctx)
	if err != nil {
		b.Fatal(err)
	}
	b.StartTimer()
	start := time.Now()
	e.publish(newRequests("hold", "hold", n, "")...)
	var res slowContainerRun
	sample := func() {
		m, err := r.Memory(e.ctx)
		if err != nil {
			b.Fatal(err)
		}
		res.peakAnon, res.peakUsage = max(res.peakAnon, m.Anon), max(res.peakUsage, m.Usage, m.MaxUsage)
		res.cpu = max(res.cpu, m.CPU)
	}
	for inFlight(b, e.ctx, probe) < n {
		if time.Since(start) > 5*time.Minute {
			b.Fatalf("only %d of %d in flight after 5 min", inFlight(b, e.ctx, probe), n)
		}
		sample()
		time.Sleep(250 * time.Millisecond)
	}
	res.startAll = time.Since(start)
	for end := time.Now().Add(hold); time.Now().Before(end); time.Sleep(250 * time.Millisecond) {
		sample()
	}
	sample()
	b.StopTimer()
	if oom, err := r.OOMKilled(e.ctx); err != nil {
		b.Fatal(err)
	} else if oom {
		res.oomKilled = 1
	}
	res.twice = e.deliveries() - n
	return res
}

// inFlight reads the replica's in_flight gauge for the hold persona from
// its /metrics; 0 while the replica does not answer.
func inFlight(b *testing.B, ctx context.Context, probe string) int {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, probe+"/metrics", nil)
	if err != nil {
		b.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), `personaq_in_flight{persona="hold"} `); ok {
			f, _ := strconv.ParseFloat(v, 64)
			return int(f)
		}
	}
	return 0
}
