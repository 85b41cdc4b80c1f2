package ledger_test

import (
	"context"
	"math"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/personaq/personaq/consumers/ledger"
	"github.com/personaq/personaq/integration/testenv"
	"github.com/personaq/personaq/retry"
)

func newBenchLedger(b *testing.B) *ledger.Ledger {
	b.Helper()
	r := testenv.StartRedis(b)
	l, err := ledger.New(ledger.Config{Client: r.Client(b), Prefix: "bench"})
	if err != nil {
		b.Fatal(err)
	}
	// Load the scripts so EVALSHA never falls back to EVAL while timed.
	warm := ledger.StepKey{TaskID: "warm-up"}
	bg, err := l.Begin(context.Background(), warm, "req")
	if err != nil {
		b.Fatal(err)
	}
	if err := l.Finish(context.Background(), warm, retry.Attempt{Number: bg.Attempt}, ledger.FinishOptions{Counted: true}); err != nil {
		b.Fatal(err)
	}
	if _, _, err := l.History(context.Background(), warm); err != nil {
		b.Fatal(err)
	}
	return l
}

// reportLatency reports the p50 and p99 of the collected round trips.
func reportLatency(b *testing.B, durs []time.Duration) {
	if len(durs) == 0 {
		return
	}
	slices.Sort(durs)
	pct := func(q float64) float64 {
		i := int(math.Ceil(q*float64(len(durs)))) - 1
		return float64(durs[max(i, 0)].Nanoseconds()) / 1e3
	}
	b.ReportMetric(pct(0.50), "p50-µs/call")
	b.ReportMetric(pct(0.99), "p99-µs/call")
}

// BenchmarkLedgerAttempt is the ledger's cost per handler attempt: one Begin
// and one Finish (two round trips) per op, against a real redis-server on
// loopback. Every step takes three attempts, so Begin returns 0–2 records.
func BenchmarkLedgerAttempt(b *testing.B) {
	l := newBenchLedger(b)
	ctx := context.Background()
	durs := make([]time.Duration, 0, 2*max(b.N, 1))
	a := retry.Attempt{
		Role: retry.RolePrimary, Agent: "claude", Class: retry.ClassValidation,
		ErrorTypes: []string{"SchemaError"}, Error: "missing field \"plan\"",
		Progress: retry.Progress{Completed: 5, Total: 9}, Duration: 42 * time.Second,
	}
	i := 0
	for b.Loop() {
		key := ledger.StepKey{TaskID: "task-" + strconv.Itoa(i/3), Step: "implement"}
		i++
		t0 := time.Now()
		bg, err := l.Begin(ctx, key, "req")
		t1 := time.Now()
		if err != nil {
			b.Fatal(err)
		}
		a.Number = bg.Attempt
		if err := l.Finish(ctx, key, a, ledger.FinishOptions{Counted: true, RequestID: "req"}); err != nil {
			b.Fatal(err)
		}
		durs = append(durs, t1.Sub(t0), time.Since(t1))
	}
	reportLatency(b, durs)
}

// BenchmarkLedgerBegin is one Begin per op on a fresh step (first attempt,
// empty history).
func BenchmarkLedgerBegin(b *testing.B) {
	l := newBenchLedger(b)
	ctx := context.Background()
	durs := make([]time.Duration, 0, max(b.N, 1))
	i := 0
	for b.Loop() {
		key := ledger.StepKey{TaskID: "task-" + strconv.Itoa(i), Step: "implement"}
		i++
		t0 := time.Now()
		if _, err := l.Begin(ctx, key, "req"); err != nil {
			b.Fatal(err)
		}
		durs = append(durs, time.Since(t0))
	}
	reportLatency(b, durs)
}

// BenchmarkLedgerPing is one PING per op: the floor any ledger call pays.
func BenchmarkLedgerPing(b *testing.B) {
	l := newBenchLedger(b)
	ctx := context.Background()
	durs := make([]time.Duration, 0, max(b.N, 1))
	for b.Loop() {
		t0 := time.Now()
		if err := l.Ping(ctx); err != nil {
			b.Fatal(err)
		}
		durs = append(durs, time.Since(t0))
	}
	reportLatency(b, durs)
}

// BenchmarkLedgerRedeliveryBegin is what a redelivery's Begin costs: a call
// to Epoch, then Begin with the floor it implies (TwoCalls), against Begin
// WithEpochFloor (OneCall). Each op begins a fresh step.
func BenchmarkLedgerRedeliveryBegin(b *testing.B) {
	l := newBenchLedger(b)
	ctx := context.Background()
	published := time.Now()
	b.Run("TwoCalls", func(b *testing.B) {
		i := 0
		for b.Loop() {
			e, err := l.Epoch(ctx)
			if err != nil {
				b.Fatal(err)
			}
			floor := 0
			if published.Before(e) {
				floor = 2
			}
			i++
			if _, err := l.Begin(ctx, ledger.StepKey{TaskID: "two-" + strconv.Itoa(i)}, "req", ledger.WithFloor(floor)); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("OneCall", func(b *testing.B) {
		i := 0
		for b.Loop() {
			i++
			if _, err := l.Begin(ctx, ledger.StepKey{TaskID: "one-" + strconv.Itoa(i)}, "req", ledger.WithEpochFloor(published, 2)); err != nil {
				b.Fatal(err)
			}
		}
	})
}
