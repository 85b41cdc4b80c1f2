package ledger_test

import (
	"context"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/personaq/personaq/consumers/ledger"
	"github.com/personaq/personaq/integration/testenv"
	"github.com/personaq/personaq/retry"
)

// benchWorkers is how many goroutines the parallel benchmarks run: the
// runtime's benchmark concurrency (64 slots), whose Begin and Finish calls
// meet in the client's connection pool.
const benchWorkers = 64

// BenchmarkLedgerAttemptParallel is BenchmarkLedgerAttempt from
// benchWorkers goroutines at once, as the runtime calls the ledger. Besides
// ns/op it reports the CPU redis-server spent per op (INFO cpu), since the
// server shares the machine with the runtime, and the time Redis counted in
// the scripts (INFO commandstats: evalsha, inner commands included).
//
//   - Plain: Begin and Finish without options.
//   - Runtime: as the runtime calls them for a first delivery that
//     succeeds: Begin with a lease and an idempotency key, Finish fenced by
//     the lease, with an attempt record of the runtime's size.
func BenchmarkLedgerAttemptParallel(b *testing.B) {
	b.Run("Plain", func(b *testing.B) {
		benchAttemptParallel(b, func(string) []ledger.BeginOption { return nil }, retry.Attempt{Class: retry.ClassSucceeded})
	})
	b.Run("Runtime", func(b *testing.B) {
		opts := func(req string) []ledger.BeginOption {
			return []ledger.BeginOption{ledger.WithLease(20 * time.Second), ledger.WithIdempotencyKey("k7f3a." + req + ".1")}
		}
		a := retry.Attempt{Role: retry.RolePrimary, Agent: "claude-sonnet", Class: retry.ClassSucceeded, Duration: 12 * time.Millisecond}
		benchAttemptParallel(b, opts, a)
	})
}

// benchAttemptParallel runs one Begin and one Finish per op, each op on a
// step of its own, from benchWorkers goroutines.
func benchAttemptParallel(b *testing.B, opts func(req string) []ledger.BeginOption, a retry.Attempt) {
	r := testenv.StartRedis(b)
	c := r.Client(b)
	l, err := ledger.New(ledger.Config{Client: c, Prefix: "bench"})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	warm := ledger.StepKey{TaskID: "warm-up"}
	bg, err := l.Begin(ctx, warm, "req", opts("warm")...)
	if err != nil {
		b.Fatal(err)
	}
	if err := l.Finish(ctx, warm, retry.Attempt{Number: bg.Attempt}, ledger.FinishOptions{Counted: true, Lease: bg.Lease}); err != nil {
		b.Fatal(err)
	}
	info := func(section string) map[string]string {
		out, err := c.Info(ctx, section).Result()
		if err != nil {
			b.Fatal(err)
		}
		m := map[string]string{}
		for _, line := range strings.Split(out, "\r\n") {
			if k, v, ok := strings.Cut(line, ":"); ok {
				m[k] = v
			}
		}
		return m
	}
	serverCPU := func() time.Duration {
		m := info("cpu")
		var total float64
		for _, k := range []string{"used_cpu_sys", "used_cpu_user"} {
			f, _ := strconv.ParseFloat(m[k], 64)
			total += f
		}
		return time.Duration(total * float64(time.Second))
	}
	if err := c.ConfigResetStat(ctx).Err(); err != nil {
		b.Fatal(err)
	}
	var next atomic.Int64
	b.SetParallelism(max(benchWorkers/runtime.GOMAXPROCS(0), 1))
	cpu0 := serverCPU()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			n := strconv.FormatInt(next.Add(1), 10)
			req := "req-" + n
			key := ledger.StepKey{TaskID: "task-" + n, Step: "implement"}
			bg, err := l.Begin(ctx, key, req, opts(req)...)
			if err != nil {
				b.Error(err)
				return
			}
			a := a
			a.Number = bg.Attempt
			if err := l.Finish(ctx, key, a, ledger.FinishOptions{Counted: true, Succeeded: true, RequestID: req, Lease: bg.Lease}); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.StopTimer()
	b.ReportMetric(float64((serverCPU()-cpu0).Nanoseconds())/1e3/float64(b.N), "redis-cpu-µs/op")
	// cmdstat_evalsha:calls=…,usec=…,…
	for _, f := range strings.Split(info("commandstats")["cmdstat_evalsha"], ",") {
		if v, ok := strings.CutPrefix(f, "usec="); ok {
			us, _ := strconv.ParseFloat(v, 64)
			b.ReportMetric(us/float64(b.N), "script-µs/op")
		}
	}
}
