package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"

	"github.com/personaq/personaq/consumers"
	"github.com/personaq/personaq/consumers/ledger"
	"github.com/personaq/personaq/consumers/wire"
	"github.com/personaq/personaq/handlers"
	"github.com/personaq/personaq/retry"
	"github.com/personaq/personaq/schemas"
)

// personaq's runtime (consumers.Runtime), as `personaq serve` runs it, on
// a nats-server (JetStream, file storage, sync_interval always) that the
// driver runs as a process of its own, with the Redis attempt ledger on
// the driver's redis-server (appendfsync always) or without a ledger.
//
// The settings are BenchmarkPipeline's (consumers/bench_test.go): one
// persona, Concurrency = the trial's workers, MaxReplicas 4 (MaxAckPending
// = 4 × workers), AckWait 30 s, JSON logs at info level to io.Discard.
// A failed first attempt returns handlers.After(1 s, err).
const personaqPersona = "coder"

type personaqQueueImpl struct {
	nc, pub *nats.Conn
	js      jetstream.JetStream // publishing and stream admin
	rdb     *redis.Client
	topo    wire.Topology
	rt      *consumers.Runtime
	cancel  context.CancelFunc
	done    chan error
	// encoded, when set, is given each request enqueue publishes.
	encoded func(data []byte)
	// batches counts the runtime's terminal-record batch commits.
	batches batchCount
}

// batchCount is the runtime's observer: it counts the terminal records'
// atomic batch commits (consumers.RecordBatchObserver), so a trial can
// say how many records shared each commit's fsync and the server's fixed
// cost per batch. Everything else it is told is dropped.
type batchCount struct{ commits, records, nanos atomic.Int64 }

func (c *batchCount) RecordBatch(records int, took time.Duration, _ error) {
	c.commits.Add(1)
	c.records.Add(int64(records))
	c.nanos.Add(int64(took))
}

func (c *batchCount) stats() batchStats {
	return batchStats{commits: c.commits.Load(), records: c.records.Load(), took: time.Duration(c.nanos.Load())}
}

// recordBatches implements batchReporter.
func (q *personaqQueueImpl) recordBatches() batchStats { return q.batches.stats() }

func (*batchCount) Attempt(string, retry.Class, time.Duration)      {}
func (*batchCount) Outcome(string, schemas.Outcome, schemas.Reason) {}
func (*batchCount) InFlight(string, int)                            {}
func (*batchCount) RedeliveryLateness(string, time.Duration)        {}
func (*batchCount) LedgerCall(string, time.Duration, error)         {}
func (*batchCount) SettleRefused(string, schemas.Outcome)           {}

var _ consumers.RecordBatchObserver = (*batchCount)(nil)

func openPersonaqLedger(ctx context.Context, tc trialConfig, h handlerFunc) (queue, error) {
	return openPersonaq(ctx, tc, h, true)
}

func openPersonaqNoLedger(ctx context.Context, tc trialConfig, h handlerFunc) (queue, error) {
	return openPersonaq(ctx, tc, h, false)
}

func openPersonaq(ctx context.Context, tc trialConfig, h handlerFunc, withLedger bool) (queue, error) {
	q, rjs, l, err := dialPersonaq(ctx, tc, withLedger)
	if err != nil {
		return nil, err
	}
	handler := handlers.Func(func(_ context.Context, req *handlers.Request) (handlers.Result, error) {
		if err := h(req.Message.TaskID, req.Attempt); err != nil {
			return handlers.Result{}, handlers.After(retryDelay, err)
		}
		return handlers.Result{}, nil
	})
	logger := zerolog.New(io.Discard).Level(zerolog.InfoLevel).With().Timestamp().Logger()
	cfg := consumers.Config{
		JetStream: rjs, Topology: q.topo, Logger: &logger, WithoutLedger: !withLedger, Observer: &q.batches,
		Personas: []consumers.Persona{{
			Name: personaqPersona, Handler: handler,
			Policy:      retry.Policy{Name: "peers", MaxAttempts: 3, AttemptTimeout: 10 * time.Second, Schedule: retry.Fixed{Every: retryDelay}},
			Concurrency: tc.workers, MaxReplicas: personaqReplicas, AckWait: personaqAckWait,
		}},
	}
	if l != nil { // not a nil *ledger.Ledger in the interface
		cfg.Ledger = l
	}
	if q.rt, err = consumers.New(cfg); err != nil {
		q.close()
		return nil, err
	}
	if err := q.rt.Provision(ctx); err != nil {
		q.close()
		return nil, err
	}
	return q, nil
}

// The persona's consumer settings (BenchmarkPipeline's).
const (
	personaqReplicas = 4
	personaqAckWait  = 30 * time.Second
)

// dialPersonaq opens the publishing connection and the consumer's own
// (returned as rjs), names the trial's streams and, withLedger, opens the
// ledger on a flushed Redis and warms it.
func dialPersonaq(ctx context.Context, tc trialConfig, withLedger bool) (*personaqQueueImpl, jetstream.JetStream, *ledger.Ledger, error) {
	q := &personaqQueueImpl{}
	fail := func(err error) (*personaqQueueImpl, jetstream.JetStream, *ledger.Ledger, error) {
		q.close()
		return nil, nil, nil, err
	}
	var err error
	if q.pub, err = nats.Connect(tc.natsURL); err != nil {
		return fail(err)
	}
	if q.nc, err = nats.Connect(tc.natsURL); err != nil {
		return fail(err)
	}
	if q.js, err = jetstream.New(q.pub); err != nil {
		return fail(err)
	}
	rjs, err := jetstream.New(q.nc)
	if err != nil {
		return fail(err)
	}
	p := strings.ToUpper(strings.ReplaceAll(tc.id, "-", "_"))
	q.topo = wire.Topology{
		RequestsStream: p + "_REQUESTS", RequestsPrefix: tc.id + ".requests",
		QuarantineStream: p + "_QUARANTINE", QuarantinePrefix: tc.id + ".quarantine",
		OutcomesStream: p + "_OUTCOMES", OutcomesPrefix: tc.id + ".outcomes",
		AttemptsStream: p + "_ATTEMPTS", AttemptsPrefix: tc.id + ".attempts",
		OutputsBucket: p + "_OUTPUTS", Storage: jetstream.FileStorage,
	}.WithDefaults()
	if !withLedger {
		return q, rjs, nil, nil
	}
	q.rdb = redis.NewClient(&redis.Options{Addr: tc.redisAddr})
	if err := q.rdb.FlushAll(ctx).Err(); err != nil {
		return fail(err)
	}
	l, err := ledger.New(ledger.Config{Client: q.rdb, Prefix: tc.id})
	if err != nil {
		return fail(err)
	}
	if err := warmLedger(ctx, l); err != nil {
		return fail(err)
	}
	return q, rjs, l, nil
}

// warmLedger runs one Begin/Finish so the ledger's scripts are loaded
// before the timed part (no EVALSHA falls back to EVAL while timed).
func warmLedger(ctx context.Context, l *ledger.Ledger) error {
	// The ledger's data set begins before the jobs are enqueued, as a
	// deployed ledger's does (a job older than it counts as one that
	// outlived a wipe, and pays a terminal-record lookup).
	if _, err := l.Epoch(ctx); err != nil {
		return err
	}
	k := ledger.StepKey{TaskID: "warm-up", Step: "main"}
	bg, err := l.Begin(ctx, k, "warm")
	if err != nil {
		return err
	}
	return l.Finish(ctx, k, retry.Attempt{Number: bg.Attempt, Class: retry.ClassSucceeded}, ledger.FinishOptions{Counted: true, Succeeded: true, RequestID: "warm"})
}

// enqueue publishes persona requests (schemas.Encode, Nats-Msg-Id = the
// request id) with PublishAsync, at most 512 unacknowledged at a time.
func (q *personaqQueueImpl) enqueue(ctx context.Context, ids []string) error {
	subject := q.topo.RequestSubject(personaqPersona)
	var futures []jetstream.PubAckFuture
	settle := func() error {
		select {
		case <-q.js.PublishAsyncComplete():
		case <-time.After(trialDeadline):
			return errors.New("publish acks timed out")
		}
		for _, f := range futures {
			select {
			case err := <-f.Err():
				return err
			default:
			}
		}
		futures = futures[:0]
		return nil
	}
	for _, id := range ids {
		req := schemas.NewRequest(id, "implement", personaqPersona)
		req.Agents = schemas.Agents{Primary: "claude-sonnet", Fallback: "gpt-5"}
		req.Input = payload
		data, err := schemas.Encode(req)
		if err != nil {
			return err
		}
		if q.encoded != nil {
			q.encoded(data)
		}
		m := &nats.Msg{Subject: subject, Data: data, Header: nats.Header{}}
		m.Header.Set(jetstream.MsgIDHeader, req.RequestID)
		f, err := q.js.PublishMsgAsync(m)
		if err != nil {
			return err
		}
		if futures = append(futures, f); len(futures) == 512 {
			if err := settle(); err != nil {
				return err
			}
		}
	}
	return settle()
}

func (q *personaqQueueImpl) start(context.Context) error {
	ctx, cancel := context.WithCancel(context.Background())
	q.cancel, q.done = cancel, make(chan error, 1)
	go func() { q.done <- q.rt.Run(ctx) }()
	return nil
}

// pending is the number of requests not settled yet (consumers.Unsettled:
// the persona consumer's pending and unacknowledged messages). The requests
// stream has limits retention, so an acked request stays stored until the
// trimmer's next purge; counting stored messages would time the purge
// interval, not the work.
func (q *personaqQueueImpl) pending(ctx context.Context) (int, error) {
	n, err := consumers.Unsettled(ctx, q.js, q.topo)
	return int(n), err
}

func (q *personaqQueueImpl) close() {
	if q.cancel != nil {
		q.cancel()
		select {
		case err := <-q.done:
			if err != nil && !errors.Is(err, context.Canceled) && !strings.Contains(err.Error(), context.Canceled.Error()) {
				fmt.Fprintf(stderr, "personaq: runtime stopped with: %v\n", err)
			}
		case <-time.After(time.Minute):
			fmt.Fprintln(stderr, "personaq: runtime did not stop within a minute")
		}
	}
	if q.js != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		for _, s := range []string{q.topo.RequestsStream, q.topo.QuarantineStream, q.topo.OutcomesStream, q.topo.AttemptsStream, "OBJ_" + q.topo.OutputsBucket} {
			_ = q.js.DeleteStream(ctx, s)
		}
		cancel()
	}
	for _, c := range []*nats.Conn{q.nc, q.pub} {
		if c != nil {
			c.Close()
		}
	}
	if q.rdb != nil {
		_ = q.rdb.Close()
	}
}
