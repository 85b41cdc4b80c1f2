package main

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/personaq/personaq/consumers"
	"github.com/personaq/personaq/integration/floor"
)

// The floor systems (personaq-floor, personaq-floor-noledger) run
// package floor's loop instead of the runtime, on the same servers,
// streams and consumer: only the broker and Redis writes personaq's
// durability contract asks for per request (with the ledger: Begin and
// Finish in Redis; a started attempt event; the terminal record,
// group-committed as atomic batches; a plain ack). They are what any
// implementation of that contract costs on these servers, so personaq's
// row read beside theirs is the runtime's own cost. Throughput only: the
// loop never fails a job, so it has no retries to time.
type floorQueue struct {
	*personaqQueueImpl
	cfg    floor.Config
	h      handlerFunc
	mu     sync.Mutex
	bodies [][]byte
	reqs   map[string]*floor.Request
	loop   *floor.Loop
}

// floorMode is which of the floor systems a trial runs.
type floorMode int

const (
	floorLedger floorMode = iota
	floorNoLedger
	// floorWithoutFinish is personaq-floor without the ledger's Finish
	// (floor.Config.WithoutFinish): not a contract, a measure of what
	// that round trip costs. Not in the default -systems.
	floorWithoutFinish
	// floorRedisProbe is personaq-floor-minredis: the ledger's Begin and
	// Finish replaced by the cheapest Redis write each
	// (floor.Config.RedisProbe), so the least any Redis ledger can cost.
	// A measure, not a contract; not in the default -systems.
	floorRedisProbe
)

func openFloorLedger(ctx context.Context, tc trialConfig, h handlerFunc) (queue, error) {
	return openFloor(ctx, tc, h, floorLedger)
}

func openFloorNoLedger(ctx context.Context, tc trialConfig, h handlerFunc) (queue, error) {
	return openFloor(ctx, tc, h, floorNoLedger)
}

func openFloorWithoutFinish(ctx context.Context, tc trialConfig, h handlerFunc) (queue, error) {
	return openFloor(ctx, tc, h, floorWithoutFinish)
}

func openFloorRedisProbe(ctx context.Context, tc trialConfig, h handlerFunc) (queue, error) {
	return openFloor(ctx, tc, h, floorRedisProbe)
}

func openFloor(ctx context.Context, tc trialConfig, h handlerFunc, mode floorMode) (queue, error) {
	if tc.kase != caseThroughput {
		return nil, fmt.Errorf("%s runs the throughput case only (its loop never fails a job)", tc.system)
	}
	q, rjs, l, err := dialPersonaq(ctx, tc, mode == floorLedger || mode == floorWithoutFinish)
	if err != nil {
		return nil, err
	}
	var probe redis.UniversalClient
	if mode == floorRedisProbe {
		q.rdb = redis.NewClient(&redis.Options{Addr: tc.redisAddr})
		if err := q.rdb.FlushAll(ctx).Err(); err != nil {
			q.close()
			return nil, err
		}
		probe = q.rdb
	}
	f := &floorQueue{personaqQueueImpl: q, h: h}
	q.encoded = func(data []byte) {
		f.mu.Lock()
		f.bodies = append(f.bodies, data)
		f.mu.Unlock()
	}
	f.cfg = floor.Config{
		JetStream: rjs, Topology: q.topo, Persona: personaqPersona, Workers: tc.workers,
		Events: true, Ledger: l, WithoutFinish: mode == floorWithoutFinish, RedisProbe: probe, LeaseTTL: personaqAckWait,
		// The handler is called once a request is acked: the trial
		// counts settled jobs through it.
		Settled: f.settled,
	}
	spec := consumers.ConsumerSpec{Persona: personaqPersona, AckWait: personaqAckWait, MaxAckPending: tc.workers * personaqReplicas}
	if err := consumers.Provision(ctx, q.js, q.topo, []consumers.ConsumerSpec{spec}); err != nil {
		q.close()
		return nil, err
	}
	return f, nil
}

func (f *floorQueue) settled(requestID string, err error) {
	if err != nil {
		fmt.Fprintf(stderr, "personaq-floor: request %s: %v\n", requestID, err)
		return // unsettled: the trial times out and fails
	}
	_ = f.h(requestID, 1)
}

// enqueue publishes the requests, then prepares their writes (encoded
// before the timed part, as BenchmarkPipelineFloor prepares them).
func (f *floorQueue) enqueue(ctx context.Context, ids []string) error {
	if err := f.personaqQueueImpl.enqueue(ctx, ids); err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	var err error
	f.reqs, err = floor.Prepare(f.topo, personaqPersona, f.bodies, time.Now())
	return err
}

func (f *floorQueue) start(ctx context.Context) error {
	f.mu.Lock()
	reqs := f.reqs
	f.mu.Unlock()
	var err error
	f.loop, err = floor.Start(ctx, f.cfg, reqs)
	return err
}

func (f *floorQueue) close() {
	if f.loop != nil {
		f.loop.Stop()
	}
	f.personaqQueueImpl.close()
}
