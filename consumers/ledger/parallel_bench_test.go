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
// server shares the machine with the runtime.
func BenchmarkLedgerAttemptParallel(b *testing.B) {
	r := testenv.StartRedis(b)
	c := r.Client(b)
	l, err := ledger.New(ledger.Config{Client: c, Prefix: "bench"})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	warm := ledger.StepKey{TaskID: "warm-up"}
	bg, err := l.Begin(ctx, warm, "req")
	if err != nil {
		b.Fatal(err)
	}
	if err := l.Finish(ctx, warm, retry.Attempt{Number: bg.Attempt}, ledger.FinishOptions{Counted: true}); err != nil {
		b.Fatal(err)
	}
	serverCPU := func() time.Duration {
		info, err := c.Info(ctx, "cpu").Result()
		if err != nil {
			b.Fatal(err)
		}
		var total float64
		for _, line := range strings.Split(info, "\r\n") {
			k, v, ok := strings.Cut(line, ":")
			if ok && (k == "used_cpu_sys" || k == "used_cpu_user") {
				f, _ := strconv.ParseFloat(v, 64)
				total += f
			}
		}
		return time.Duration(total * float64(time.Second))
	}
	var next atomic.Int64
	b.SetParallelism(max(benchWorkers/runtime.GOMAXPROCS(0), 1))
	cpu0 := serverCPU()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			key := ledger.StepKey{TaskID: "task-" + strconv.FormatInt(next.Add(1), 10), Step: "implement"}
			bg, err := l.Begin(ctx, key, "req")
			if err != nil {
				b.Error(err)
				return
			}
			a := retry.Attempt{Number: bg.Attempt, Class: retry.ClassSucceeded}
			if err := l.Finish(ctx, key, a, ledger.FinishOptions{Counted: true, Succeeded: true, RequestID: "req"}); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.StopTimer()
	b.ReportMetric(float64((serverCPU()-cpu0).Nanoseconds())/1e3/float64(b.N), "redis-cpu-µs/op")
}
