//go:build linux

package consumers_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/personaq/personaq/consumers"
	"github.com/personaq/personaq/consumers/client"
	"github.com/personaq/personaq/consumers/ledger"
	"github.com/personaq/personaq/consumers/wire"
	"github.com/personaq/personaq/handlers"
	"github.com/personaq/personaq/integration/testenv"
	"github.com/personaq/personaq/retry"
	"github.com/personaq/personaq/schemas"
)

// Cancel benchmarks (BENCHMARKS.md, "Cancel"):
//
//	go test -run='^$' -bench='^BenchmarkCancel' -benchtime=1x -count=1 ./consumers/

// BenchmarkCancelRunningAgents runs 100 command agents (each a shell with
// a child, under its supervisor) across 2 replicas, cancels their task at
// once, and reports the time from the cancel call until each agent's
// process group is gone: p50, p99 and the last. It also reports what
// supervision costs per agent: processes, and the supervisor's resident
// memory (private, and the binary's shared file pages).
func BenchmarkCancelRunningAgents(b *testing.B) {
	const agents, perReplica = 100, 50
	for range b.N {
		b.StopTimer()
		n := testenv.StartNATS(b)
		r := testenv.StartRedis(b)
		dir := b.TempDir()
		script := `cut -d' ' -f5 /proc/$$/stat > "$DIR/$PERSONAQ_REQUEST_ID.tmp" && mv "$DIR/$PERSONAQ_REQUEST_ID.tmp" "$DIR/$PERSONAQ_REQUEST_ID"
sleep 300 & wait`
		inv, err := handlers.NewCommand(handlers.CommandConfig{Path: "/bin/sh", Args: []string{"-c", script}, Env: []string{"DIR=" + dir}})
		if err != nil {
			b.Fatal(err)
		}
		pol := retry.Policy{Name: "bench", MaxAttempts: 2, AttemptTimeout: 5 * time.Minute, Schedule: retry.Fixed{Every: time.Second}}
		for range 2 {
			startBenchReplica(b, n, r, consumers.Persona{Name: "agent", Handler: inv, Policy: pol, Concurrency: perReplica, MaxReplicas: 2})
		}
		js := n.JetStream(b)
		if err := consumers.Provision(context.Background(), js, wire.Topology{}, nil); err != nil {
			b.Fatal(err)
		}
		c, err := client.New(client.Config{JetStream: js})
		if err != nil {
			b.Fatal(err)
		}
		for range agents {
			if _, err := c.Submit(context.Background(), schemas.NewRequest("bench-running", "main", "agent"), client.SkipPersonaCheck()); err != nil {
				b.Fatal(err)
			}
		}
		groups := waitForAgents(b, dir, agents)
		procs, anon, shared := supervisionCost(groups)
		b.StartTimer()
		t0 := time.Now()
		goneC := make(chan []time.Duration, 1)
		go func() { goneC <- groupsGone(groups, t0, 30*time.Second) }()
		res, err := c.CancelTask(context.Background(), "bench-running", "benchmark")
		if err != nil || len(res.Cancelled) != agents {
			b.Fatalf("cancel task: %v (%d cancelled)", err, len(res.Cancelled))
		}
		called := time.Since(t0)
		gone := <-goneC
		b.StopTimer()
		if len(gone) != len(groups) {
			b.Fatalf("%d of %d agent groups still alive 30 s after the cancel", len(groups)-len(gone), len(groups))
		}
		slices.Sort(gone)
		b.ReportMetric(float64(called.Milliseconds()), "cancel_call_ms")
		b.ReportMetric(float64(gone[len(gone)/2].Milliseconds()), "gone_p50_ms")
		b.ReportMetric(float64(gone[len(gone)*99/100-1].Milliseconds()), "gone_p99_ms")
		b.ReportMetric(float64(gone[len(gone)-1].Milliseconds()), "gone_last_ms")
		b.ReportMetric(procs, "procs_per_agent")
		b.ReportMetric(anon, "supervisor_private_kB")
		b.ReportMetric(shared, "supervisor_shared_kB")
	}
}

// BenchmarkCancelQueuedTask cancels a task's 10,000 queued requests with
// one CancelTask, then starts a replica: it reports the call's wall time
// and the time until the replica has removed them all, and fails if any
// one of them started.
func BenchmarkCancelQueuedTask(b *testing.B) {
	const queued = 10_000
	for range b.N {
		b.StopTimer()
		n := testenv.StartNATS(b)
		r := testenv.StartRedis(b)
		js := n.JetStream(b)
		topo := wire.Topology{}.WithDefaults()
		if err := consumers.Provision(context.Background(), js, topo, nil); err != nil {
			b.Fatal(err)
		}
		c, err := client.New(client.Config{JetStream: js})
		if err != nil {
			b.Fatal(err)
		}
		publishQueued(b, js, topo, queued)
		var started atomic.Int64
		never := handlers.Func(func(context.Context, *handlers.Request) (handlers.Result, error) {
			started.Add(1)
			return handlers.Result{Output: []byte(`1`)}, nil
		})
		b.StartTimer()
		t0 := time.Now()
		res, err := c.CancelTask(context.Background(), "bench-queued", "benchmark")
		if err != nil || len(res.Cancelled) != queued {
			b.Fatalf("cancel task: %v (%d cancelled)", err, len(res.Cancelled))
		}
		called := time.Since(t0)
		b.StopTimer()
		t1 := time.Now()
		pol := retry.Policy{Name: "bench", MaxAttempts: 2, AttemptTimeout: time.Minute}
		startBenchReplica(b, n, r, consumers.Persona{Name: "echo", Handler: never, Policy: pol, Concurrency: 64})
		waitDrained(b, js, topo, 5*time.Minute)
		drained := time.Since(t1)
		if started.Load() != 0 {
			b.Fatalf("%d cancelled requests started", started.Load())
		}
		b.ReportMetric(float64(called.Milliseconds()), "cancel_task_ms")
		b.ReportMetric(float64(drained.Milliseconds()), "replica_drain_ms")
		b.ReportMetric(float64(started.Load()), "started")
	}
}

func startBenchReplica(b *testing.B, n *testenv.NATS, r *testenv.Redis, p consumers.Persona) {
	b.Helper()
	l, err := ledger.New(ledger.Config{Client: r.Client(b)})
	if err != nil {
		b.Fatal(err)
	}
	log := zerolog.Nop()
	rt, err := consumers.New(consumers.Config{JetStream: n.JetStream(b), Personas: []consumers.Persona{p}, Ledger: l,
		Logger: &log, DrainTimeout: 5 * time.Second, FetchMaxWait: 200 * time.Millisecond, NoAttemptEvents: false})
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = rt.Run(ctx) }()
	b.Cleanup(func() { cancel(); <-done })
}

// publishQueued publishes n requests of task bench-queued for persona
// echo, 512 at a time.
func publishQueued(b *testing.B, js jetstream.JetStream, topo wire.Topology, n int) {
	b.Helper()
	for done := 0; done < n; {
		for range min(512, n-done) {
			req := schemas.NewRequest("bench-queued", "main", "echo")
			data, err := schemas.Encode(req)
			if err != nil {
				b.Fatal(err)
			}
			m := &nats.Msg{Subject: topo.RequestSubject("echo"), Data: data, Header: nats.Header{}}
			m.Header.Set(jetstream.MsgIDHeader, req.RequestID)
			if _, err := js.PublishMsgAsync(m); err != nil {
				b.Fatal(err)
			}
			done++
		}
		select {
		case <-js.PublishAsyncComplete():
		case <-time.After(time.Minute):
			b.Fatal("publish: async publishes pending after a minute")
		}
	}
}

// waitDrained waits until the requests stream is empty.
func waitDrained(b *testing.B, js jetstream.JetStream, topo wire.Topology, timeout time.Duration) {
	b.Helper()
	deadline := time.Now().Add(timeout)
	for {
		s, err := js.Stream(context.Background(), topo.RequestsStream)
		if err != nil {
			b.Fatal(err)
		}
		info, err := s.Info(context.Background())
		if err != nil {
			b.Fatal(err)
		}
		if info.State.Msgs == 0 {
			return
		}
		if time.Now().After(deadline) {
			b.Fatalf("%d requests left after %s", info.State.Msgs, timeout)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// waitForAgents waits until n agents noted their process group in dir.
func waitForAgents(b *testing.B, dir string, n int) []int {
	b.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		entries, _ := os.ReadDir(dir)
		var groups []int
		for _, e := range entries {
			if strings.HasSuffix(e.Name(), ".tmp") {
				continue
			}
			raw, err := os.ReadFile(filepath.Join(dir, e.Name()))
			if g, err2 := strconv.Atoi(strings.TrimSpace(string(raw))); err == nil && err2 == nil {
				groups = append(groups, g)
			}
		}
		if len(groups) == n {
			return groups
		}
		if time.Now().After(deadline) {
			b.Fatalf("%d of %d agents started", len(groups), n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// groupCounts counts the live processes of each process group.
func groupCounts() map[int]int {
	entries, _ := os.ReadDir("/proc")
	out := map[int]int{}
	for _, e := range entries {
		stat, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		f := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
		if len(f) > 2 && f[0] != "Z" {
			if g, err := strconv.Atoi(f[2]); err == nil {
				out[g]++
			}
		}
	}
	return out
}

// groupsGone returns, for each group seen gone within timeout, how long
// after t0 it was first seen empty.
func groupsGone(groups []int, t0 time.Time, timeout time.Duration) []time.Duration {
	gone := map[int]time.Duration{}
	for len(gone) < len(groups) && time.Since(t0) < timeout {
		counts := groupCounts()
		at := time.Since(t0)
		for _, g := range groups {
			if _, ok := gone[g]; !ok && counts[g] == 0 {
				gone[g] = at
			}
		}
		time.Sleep(2 * time.Millisecond)
	}
	out := make([]time.Duration, 0, len(gone))
	for _, d := range gone {
		out = append(out, d)
	}
	return out
}

// supervisionCost reads, over the agents' groups, the processes per group
// and the supervisor's (the group leader's) private and shared resident
// memory in kB, averaged.
func supervisionCost(groups []int) (procs, anon, shared float64) {
	counts := groupCounts()
	for _, g := range groups {
		procs += float64(counts[g])
		status, _ := os.ReadFile("/proc/" + strconv.Itoa(g) + "/status")
		for _, line := range strings.Split(string(status), "\n") {
			f := strings.Fields(line)
			if len(f) < 2 {
				continue
			}
			v, _ := strconv.ParseFloat(f[1], 64)
			switch f[0] {
			case "RssAnon:":
				anon += v
			case "RssFile:", "RssShmem:":
				shared += v
			}
		}
	}
	k := float64(len(groups))
	return procs / k, anon / k, shared / k
}
