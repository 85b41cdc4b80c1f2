// Package floor is the least work a persona request needs under
// personaq's durability contract, with none of the runtime's own: what
// any implementation of that contract pays on the broker and the ledger.
// The benchmarks run it beside the runtime (consumers'
// BenchmarkPipelineFloor, the personaq-floor systems of bench-peers), so
// a throughput or CPU target can be read against what the broker and
// Redis leave, and runtime ÷ floor is what the runtime's own work costs.
//
// Per request, a worker (one of Config.Workers, fed by a jetstream
// Consume loop):
//
//  1. with a ledger, begins the attempt in Redis (a lease and an
//     idempotency key, as the runtime begins one; Config.RedisProbe
//     measures the cheapest Redis write in its place);
//  2. with Events, publishes the request's "started" attempt event (core
//     NATS, into the attempts stream);
//  3. with a ledger, finishes the attempt (counted, succeeded, fenced by
//     its lease);
//  4. stores the request's terminal record with its create-once
//     expectation, group-committed with the records of concurrent
//     requests as one atomic batch (as the runtime commits them), and
//     waits for its confirmation;
//  5. acks the request (a plain ack: the requests stream has limits
//     retention).
//
// Steps 4 and 5 give the worker back first, as the runtime frees a
// request's worker slot when its handler returns: up to FinishingPerWorker
// × Workers requests wait for their records without a worker, so records
// keep queueing behind a commit in flight and batches grow.
//
// Events and records are encoded by Prepare, before the loop starts;
// nothing is decoded while it runs (a request is found by its
// Nats-Msg-Id), nothing is logged, nothing is classified.
package floor

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/redis/go-redis/v9"

	"github.com/personaq/personaq/consumers/ledger"
	"github.com/personaq/personaq/consumers/wire"
	"github.com/personaq/personaq/retry"
	"github.com/personaq/personaq/schemas"
)

// Config is one floor loop.
type Config struct {
	// JetStream is the loop's own connection, as a replica has one.
	JetStream jetstream.JetStream
	// Topology names the streams (provisioned by consumers.Provision) and
	// Persona the durable consumer the loop reads.
	Topology wire.Topology
	Persona  string
	// Workers is how many requests are in flight at once.
	Workers int
	// Events publishes a started attempt event per request.
	Events bool
	// Ledger, when set, begins and finishes each attempt in it.
	Ledger *ledger.Ledger
	// WithoutFinish, with a Ledger, begins each attempt and never
	// finishes it: not a contract a runtime may keep (the attempt stays
	// leased and uncounted until its lease ends), only a measure of what
	// the Finish round trip costs.
	WithoutFinish bool
	// RedisProbe, instead of a Ledger, begins and finishes each attempt
	// with the cheapest Redis writes there are: SET a key of the request's
	// NX with the lease's TTL, then DEL it, pipelined as the ledger
	// pipelines its scripts. Not a contract (nothing a later attempt could
	// read is kept), a measure of what the two round trips of any Redis
	// ledger cost per attempt, whatever its scripts do.
	RedisProbe redis.UniversalClient
	// LeaseTTL is the attempt's lease (with a Ledger); default 30 s.
	LeaseTTL time.Duration
	// Settled is called once per request, after its ack (or its failure),
	// on the goroutine that finished it; calls may be concurrent.
	Settled func(requestID string, err error)
}

// The runtime's bounds, which the floor keeps (a test of the runtime's
// package holds them equal): requests per worker slot waiting for their
// records without the slot, and the sizes of a batch of terminal records
// (at most BatchMax; fewer than BatchMin are written one by one).
const (
	FinishingPerWorker = 3
	BatchMax           = 256
	BatchMin           = 4
)

// Request is one request's prepared writes.
type Request struct {
	id     string
	key    ledger.StepKey
	event  []byte
	record *nats.Msg
}

// ErrProbeWithLedger is a Config with both RedisProbe and Ledger: the
// probe stands in for a ledger, not beside one.
var ErrProbeWithLedger = errors.New("floor: RedisProbe and Ledger: set one or neither")

// ErrUnprepared is a delivered request Prepare was not given.
var ErrUnprepared = errors.New("floor: a request without prepared writes")

// Prepare encodes, for each encoded persona request, the started event and
// the terminal record the runtime would write for it, keyed by request id
// (the Nats-Msg-Id the request was published with).
func Prepare(topo wire.Topology, persona string, bodies [][]byte, at time.Time) (map[string]*Request, error) {
	topo = topo.WithDefaults()
	out := make(map[string]*Request, len(bodies))
	for _, body := range bodies {
		req, err := schemas.DecodeRequest(body)
		if err != nil {
			return nil, fmt.Errorf("floor: %w", err)
		}
		p, err := prepareOne(topo, persona, req, at.UTC())
		if err != nil {
			return nil, err
		}
		out[req.RequestID] = p
	}
	return out, nil
}

func prepareOne(topo wire.Topology, persona string, req *schemas.PersonaRequest, at time.Time) (*Request, error) {
	ev, err := schemas.MarshalAttempt(&schemas.AttemptEvent{
		SchemaVersion: schemas.Version, RequestID: req.RequestID, TaskID: req.TaskID, Step: req.Step,
		Persona: persona, Kind: schemas.AttemptStarted, Attempt: 1, MaxAttempts: 3,
		Agent: req.Agents.Primary, CorrelationID: req.CorrelationID, At: at,
	})
	if err != nil {
		return nil, fmt.Errorf("floor: encode event: %w", err)
	}
	rec, _, err := wire.RecordMsg(topo, &schemas.OutcomeEvent{
		SchemaVersion: schemas.Version, RequestID: req.RequestID, TaskID: req.TaskID, Step: req.Step,
		Persona: persona, Outcome: schemas.OutcomeSucceeded, Attempts: 1, Agent: req.Agents.Primary,
		CorrelationID: req.CorrelationID, RequestDigest: schemas.RequestDigest(req), At: at, SubmittedAt: req.CreatedAt,
	})
	if err != nil {
		return nil, fmt.Errorf("floor: %w", err)
	}
	return &Request{
		id: req.RequestID,
		// The runtime's key: one ledger entry per request of a task step.
		key:   ledger.StepKey{TaskID: req.TaskID, Step: req.Step + "@" + req.RequestID},
		event: ev, record: rec,
	}, nil
}

// Loop is a running floor loop.
type Loop struct {
	cfg     Config
	reqs    map[string]*Request
	records *batcher
	work    chan jetstream.Msg
	workers sync.WaitGroup
	cc      jetstream.ConsumeContext
	probe   *probe
	// finishing holds a token per request waiting for its record
	// without a worker; finishers counts their goroutines.
	finishing chan struct{}
	finishers sync.WaitGroup
}

// Start begins consuming; Stop ends it.
func Start(ctx context.Context, cfg Config, reqs map[string]*Request) (*Loop, error) {
	if cfg.Workers <= 0 {
		return nil, fmt.Errorf("floor: workers: must be positive, got %d", cfg.Workers)
	}
	if cfg.LeaseTTL <= 0 {
		cfg.LeaseTTL = 30 * time.Second
	}
	cfg.Topology = cfg.Topology.WithDefaults()
	l := &Loop{cfg: cfg, reqs: reqs, records: newBatcher(cfg.JetStream.Conn(), cfg.JetStream),
		work: make(chan jetstream.Msg, cfg.Workers), finishing: make(chan struct{}, FinishingPerWorker*cfg.Workers)}
	if cfg.RedisProbe != nil {
		if cfg.Ledger != nil {
			return nil, ErrProbeWithLedger
		}
		l.probe = newProbe(cfg.RedisProbe)
	}
	cons, err := cfg.JetStream.Consumer(ctx, cfg.Topology.RequestsStream, wire.Durable(cfg.Persona))
	if err != nil {
		return nil, fmt.Errorf("floor: consumer: %w", err)
	}
	for range cfg.Workers {
		l.workers.Go(l.serve)
	}
	// PullExpiry 1 s, as the runtime's fetches wait at most that long.
	l.cc, err = cons.Consume(func(m jetstream.Msg) { l.work <- m }, jetstream.PullMaxMessages(cfg.Workers), jetstream.PullExpiry(time.Second))
	if err != nil {
		close(l.work)
		l.workers.Wait()
		return nil, fmt.Errorf("floor: consume: %w", err)
	}
	return l, nil
}

// Stop stops consuming and waits for the requests in flight.
func (l *Loop) Stop() {
	l.cc.Stop()
	<-l.cc.Closed()
	close(l.work)
	l.workers.Wait()
	l.finishers.Wait()
}

func (l *Loop) serve() {
	for m := range l.work {
		id := m.Headers().Get(jetstream.MsgIDHeader)
		p, err := l.handle(id)
		if err != nil {
			l.settled(id, err)
			continue
		}
		select {
		case l.finishing <- struct{}{}: // the worker goes back
			l.finishers.Go(func() {
				l.finish(id, p, m)
				<-l.finishing
			})
		default: // too many finishing: this one keeps its worker
			l.finish(id, p, m)
		}
	}
}

func (l *Loop) settled(id string, err error) {
	if l.cfg.Settled != nil {
		l.cfg.Settled(id, err)
	}
}

// finish stores the request's record, acks it and reports it settled.
func (l *Loop) finish(id string, p *Request, m jetstream.Msg) {
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	err := l.records.write(ctx, p.record)
	if err != nil {
		err = fmt.Errorf("floor: record: %w", err)
	} else {
		err = m.Ack()
	}
	l.settled(id, err)
}

// opTimeout bounds one request's ledger calls and its record's write.
const opTimeout = 10 * time.Second

// handle is one request's work before its record (see the package
// comment).
func (l *Loop) handle(id string) (*Request, error) {
	p := l.reqs[id]
	if p == nil {
		return nil, fmt.Errorf("%w: %q", ErrUnprepared, id)
	}
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	var lease ledger.Lease
	if led := l.cfg.Ledger; led != nil {
		bg, err := led.Begin(ctx, p.key, p.id, ledger.WithLease(l.cfg.LeaseTTL), ledger.WithIdempotencyKey(p.id))
		if err != nil {
			return nil, fmt.Errorf("floor: begin: %w", err)
		}
		lease = bg.Lease
	}
	if l.probe != nil {
		if err := l.probe.do(ctx, "set", probeKey(p.id), "1", "nx", "px", l.cfg.LeaseTTL.Milliseconds()); err != nil {
			return nil, fmt.Errorf("floor: probe begin: %w", err)
		}
	}
	if l.cfg.Events {
		if err := l.cfg.JetStream.Conn().Publish(l.cfg.Topology.AttemptSubject(p.id, string(schemas.AttemptStarted)), p.event); err != nil {
			return nil, fmt.Errorf("floor: event: %w", err)
		}
	}
	if led := l.cfg.Ledger; led != nil && !l.cfg.WithoutFinish {
		a := retry.Attempt{Number: 1, Class: retry.ClassSucceeded}
		if err := led.Finish(ctx, p.key, a, ledger.FinishOptions{Counted: true, Succeeded: true, RequestID: p.id, Lease: lease}); err != nil {
			return nil, fmt.Errorf("floor: finish: %w", err)
		}
	}
	if l.probe != nil {
		if err := l.probe.do(ctx, "del", probeKey(p.id)); err != nil {
			return nil, fmt.Errorf("floor: probe finish: %w", err)
		}
	}
	return p, nil
}

// probeKey is a request's key in Config.RedisProbe.
func probeKey(requestID string) string { return "floor:probe:" + requestID }
