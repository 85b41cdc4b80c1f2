package consumers_test

import (
	"context"
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/personaq/personaq/consumers"
	"github.com/personaq/personaq/handlers"
)

// BenchmarkSlotCeiling measures how close one replica comes to its slot
// ceiling (slots ÷ handler time) for a persona that waits 50 ms, with the
// Redis ledger, in one process: the time a slot spends outside the
// handler (pull, decode, ledger Begin and Finish, terminal record, ack) is
// what separates the two. It counts from the first handler call to the
// last handler's return (steady state; the runtime's start-up is not a
// slot cycle) and reports req/s, the share of the ceiling and the mean
// time per request a slot spends outside the handler.
func BenchmarkSlotCeiling(b *testing.B) {
	const (
		slots = 16
		wait  = 50 * time.Millisecond
		n     = 800
	)
	for _, st := range benchStorages {
		b.Run(st.name, func(b *testing.B) {
			e := newBenchEnv(b, true)
			e.storage = st.storage
			var tput float64
			for range b.N {
				tput = benchSlotRound(b, e, slots, wait, n)
			}
			ceiling := float64(slots) / wait.Seconds()
			b.ReportMetric(tput, "req/s")
			b.ReportMetric(tput/ceiling, "of_ceiling")
			b.ReportMetric((float64(slots)/tput-wait.Seconds())*1000, "outside_handler_ms")
			b.ReportMetric(0, "ns/op")
		})
	}
}

// benchSlotRound runs n requests through a runtime with the given slots
// and a handler that waits; it returns requests per second.
func benchSlotRound(b *testing.B, e *benchEnv, slots int, wait time.Duration, n int) float64 {
	b.Helper()
	b.StopTimer()
	topo := e.benchTopology(b)
	var seen, first, last atomic.Int64
	done := make(chan struct{})
	h := handlers.Func(func(ctx context.Context, _ *handlers.Request) (handlers.Result, error) {
		first.CompareAndSwap(0, time.Now().UnixNano())
		t := time.NewTimer(wait)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
			return handlers.Result{}, ctx.Err()
		}
		if seen.Add(1) == int64(n) {
			last.Store(time.Now().UnixNano())
			close(done)
		}
		return handlers.Result{}, nil
	})
	rt, err := consumers.New(consumers.Config{
		JetStream: e.nats.JetStream(b), Topology: topo, Logger: benchLogger(), Ledger: e.benchLedger(b),
		Personas: []consumers.Persona{{
			Name: benchPersona, Handler: h, Policy: benchPolicy(10 * time.Second),
			Concurrency: slots, AckWait: benchAckWait,
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
	b.StartTimer()
	run := benchStart(b, rt)
	e.benchWaitEmpty(b, topo.RequestsStream, done, func() string { return fmt.Sprintf("%d of %d", seen.Load(), n) })
	b.StopTimer()
	run.stop(b)
	return benchRate(n, time.Duration(last.Load()-first.Load()))
}
