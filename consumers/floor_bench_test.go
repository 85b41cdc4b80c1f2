package consumers_test

import (
	"context"
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/personaq/personaq/consumers"
	"github.com/personaq/personaq/integration/floor"
)

// The floor loop (package floor) does, per request, only the broker and
// Redis operations the runtime's durability contract asks for, with none
// of the runtime's own work. What it measures is how fast any
// implementation of that contract can go on this server: the runtime's
// ratio to the raw loop is bounded by the floor's, and runtime ÷ floor is
// what the runtime's own work costs.

// floorMode picks what the floor loop does per request besides storing the
// record and acking.
type floorMode struct {
	events bool // publish a started attempt event
	ledger bool // Begin and Finish the attempt in the Redis ledger
	// probe puts the cheapest Redis write in place of each of the
	// ledger's calls (floor.Config.RedisProbe): what any Redis ledger's
	// two round trips cost, a measure rather than a contract.
	probe bool
}

// benchServerInMsgs is the messages the in-process server has received
// from its clients so far.
func benchServerInMsgs(b *testing.B, e *benchEnv) int64 {
	b.Helper()
	v, err := e.nats.Server.Varz(nil)
	if err != nil {
		b.Fatal(err)
	}
	return v.InMsgs
}

// benchFloor runs the floor loop over n pre-published requests and returns
// the time from starting the loop until every request is acked and the
// requests stream has nothing unsettled.
func benchFloor(b *testing.B, e *benchEnv, n int, mode floorMode) time.Duration {
	b.Helper()
	b.StopTimer()
	ctx := context.Background()
	topo := e.benchTopology(b)
	if err := consumers.Provision(ctx, e.js, topo, []consumers.ConsumerSpec{benchSpec()}); err != nil {
		b.Fatal(err)
	}
	reqs := benchRequests(b, n)
	e.benchPublish(b, topo, reqs)
	bodies := make([][]byte, len(reqs))
	for i, m := range reqs {
		bodies[i] = m.data
	}
	prepared, err := floor.Prepare(topo, benchPersona, bodies, time.Now())
	if err != nil {
		b.Fatal(err)
	}
	cfg := floor.Config{
		JetStream: e.benchJS(b), // the loop's own connection, as a replica has
		Topology:  topo, Persona: benchPersona, Workers: benchSlots,
		Events: mode.events, LeaseTTL: benchAckWait,
	}
	if mode.ledger {
		cfg.Ledger = e.benchRedisLedger(b)
	}
	if mode.probe {
		cfg.RedisProbe = e.redis.Client(b)
	}
	var settled, failed atomic.Int64
	done := make(chan struct{})
	cfg.Settled = func(_ string, err error) {
		if err != nil {
			failed.Add(1)
		}
		if settled.Add(1) == int64(n) {
			close(done)
		}
	}

	runtime.GC()
	clock := e.benchStartClock(b)
	loop, err := floor.Start(ctx, cfg, prepared)
	if err != nil {
		b.Fatal(err)
	}
	e.benchWaitEmpty(b, topo.RequestsStream, done, func() string { return fmt.Sprintf("%d of %d settled", settled.Load(), n) })
	took := clock.stop(b)

	loop.Stop()
	if f := failed.Load(); f > 0 {
		b.Errorf("floor loop: %d of %d requests failed", f, n)
	}
	if got := e.benchWaitCount(b, topo.OutcomesStream, uint64(n)); got != uint64(n) {
		b.Errorf("floor loop: %d terminal records stored, want %d", got, n)
	}
	return took
}

// BenchmarkPipelineFloor runs, on one server and back to back, the raw
// Ack loop (the memory target's baseline), the floor loop in its four
// modes (and a fifth, the ledger's calls replaced by the cheapest Redis
// writes) and the runtime (ledger off, then on), benchRatioN requests each,
// and reports each loop's rate and its ratio to the raw Ack loop, the
// runtime's rate as a fraction of the floor with the same writes (events
// on: the runtime publishes them by default), the messages the server
// received per request in each loop, and each loop's CPU per request and
// CPUs kept busy (this process, with the in-process server, and
// redis-server): whether a loop is bound by its work or by its waits.
//
//	go test -run='^$' -bench='^BenchmarkPipelineFloor$' -benchtime=1x -count=3 ./consumers/
func BenchmarkPipelineFloor(b *testing.B) {
	for _, st := range benchStorages {
		b.Run(st.name, func(b *testing.B) {
			e := newBenchEnv(b, true)
			e.storage = st.storage
			modes := []struct {
				name string
				mode floorMode
			}{
				{"floor_record", floorMode{}},
				{"floor_events", floorMode{events: true}},
				{"floor_ledger", floorMode{ledger: true}},
				{"floor_events_ledger", floorMode{events: true, ledger: true}},
				{"floor_events_redis_probe", floorMode{events: true, probe: true}},
			}
			var raw, off, led time.Duration
			floors := make([]time.Duration, len(modes))
			// msgs counts the messages the server received during each
			// loop (the requests' own publishes and the set-up included),
			// by loop name.
			msgs := map[string]int64{}
			// cpu and wall are each loop's CPU (this process, with the
			// in-process server, and redis-server) and wall time over its
			// measured part, by loop name.
			cpu, wall := map[string]time.Duration{}, map[string]time.Duration{}
			counted := func(name string, run func() time.Duration) time.Duration {
				before := benchServerInMsgs(b, e)
				took := run()
				msgs[name] += benchServerInMsgs(b, e) - before
				cpu[name] += e.lastCPU
				wall[name] += took
				return took
			}
			for range b.N {
				raw += counted("raw_ack", func() time.Duration { return benchRaw(b, e, benchRatioN, benchAck) })
				for i, m := range modes {
					floors[i] += counted(m.name, func() time.Duration { return benchFloor(b, e, benchRatioN, m.mode) })
				}
				off += counted("runtime_ledger_off", func() time.Duration { return benchPipeline(b, e, benchRatioN, false).took })
				led += counted("runtime_ledger", func() time.Duration { return benchPipeline(b, e, benchRatioN, true).took })
			}
			n := benchRatioN * b.N
			for name, m := range msgs {
				b.ReportMetric(float64(m)/float64(n), name+"_server_in_msgs/req")
				if cpu[name] <= 0 {
					b.Errorf("%s: no CPU time measured over %s", name, wall[name])
				}
				b.ReportMetric(float64(cpu[name].Microseconds())/float64(n), name+"_cpu_us/req")
				b.ReportMetric(cpu[name].Seconds()/wall[name].Seconds(), name+"_cpus")
			}
			b.ReportMetric(benchRate(n, raw), "raw_ack_msgs/s")
			for i, m := range modes {
				b.ReportMetric(raw.Seconds()/floors[i].Seconds(), m.name+"_ratio")
			}
			b.ReportMetric(raw.Seconds()/off.Seconds(), "runtime_ledger_off_ratio")
			b.ReportMetric(raw.Seconds()/led.Seconds(), "runtime_ledger_ratio")
			b.ReportMetric(floors[1].Seconds()/off.Seconds(), "runtime_ledger_off_of_floor")
			b.ReportMetric(floors[3].Seconds()/led.Seconds(), "runtime_ledger_of_floor")
		})
	}
}
