package client

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/personaq/personaq/consumers/wire"
	"github.com/personaq/personaq/schemas"
)

// Result is a request that succeeded: its terminal record and the
// persona's output, read back byte for byte (from the record or, when
// large, from the outputs object store).
type Result struct {
	Record *schemas.OutcomeEvent
	Output []byte
}

type awaitOptions struct {
	onAttempt func(*schemas.AttemptEvent)
	onOutput  func(*schemas.OutputChunk)
}

// AwaitOption configures Await and Run.
type AwaitOption func(*awaitOptions)

// OnAttempt calls f with each attempt event of the request (started;
// failed, with the class, error, next delay and next agent) as it happens,
// including those published before the call. f runs on one goroutine.
func OnAttempt(f func(*schemas.AttemptEvent)) AwaitOption {
	return func(o *awaitOptions) { o.onAttempt = f }
}

// Await waits until requestID has its terminal record, or ctx is done. It
// returns the output when the request succeeded and a *StoppedError
// otherwise. The record may have been written before the call.
func (c *Client) Await(ctx context.Context, requestID string, opts ...AwaitOption) (*Result, error) {
	var o awaitOptions
	for _, opt := range opts {
		opt(&o)
	}
	drainAttempts := func(context.Context, *schemas.OutcomeEvent) {}
	if o.onAttempt != nil {
		a, err := c.followAttempts(ctx, requestID, o.onAttempt)
		if err != nil {
			return nil, err
		}
		defer a.stop()
		drainAttempts = a.drain
	}
	drain := func(context.Context) {}
	if o.onOutput != nil {
		d, stop, err := c.followOutput(ctx, requestID, o.onOutput)
		if err != nil {
			return nil, err
		}
		defer stop()
		drain = d
	}
	rec, err := c.awaitRecord(ctx, requestID)
	if err != nil {
		return nil, err
	}
	drainAttempts(ctx, rec)
	drain(ctx)
	return c.result(ctx, rec)
}

// awaitRecord subscribes to requestID's record subject, then looks the
// record up: one written before the subscription is found by the lookup,
// one written after it reaches the subscription. A core subscription, not
// a JetStream consumer per call: many concurrent Awaits cost the server
// nothing but their interest.
//
// The server hands a published record to core subscribers before its
// stream stores it, so a record published just before the subscription
// took effect and stored just after the lookup is seen by neither: the
// record is looked up again at growing intervals (recheckFirst, doubling
// up to recheckMax) as well.
func (c *Client) awaitRecord(ctx context.Context, requestID string) (*schemas.OutcomeEvent, error) {
	got := make(chan *nats.Msg, 1)
	sub, err := c.js.Conn().ChanSubscribe(c.topo.OutcomeFilter(requestID), got)
	if err != nil {
		return nil, fmt.Errorf("await request %s: subscribe to its record: %w", requestID, err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	recheck := time.NewTimer(recheckFirst)
	defer recheck.Stop()
	for wait := recheckFirst; ; wait = min(2*wait, recheckMax) {
		rec, err := c.Record(ctx, requestID)
		if !errors.Is(err, wire.ErrNoOutcome) {
			return rec, err
		}
		recheck.Reset(wait)
		select {
		case <-got:
			return c.storedRecord(ctx, requestID)
		case <-recheck.C:
		case <-ctx.Done():
			return nil, fmt.Errorf("await request %s: %w", requestID, context.Cause(ctx))
		}
	}
}

// The record lookups behind an Await's subscription: the first soon after
// it (the window is a stream's store lagging its core delivery), then
// rarer, so that many waiting Awaits cost the server little.
const (
	recheckFirst = 100 * time.Millisecond
	recheckMax   = 5 * time.Second
)

// storedRecord reads the record the stream holds once the subscription saw
// one. The message seen is only a wake-up: core NATS also delivers a
// create-once write the stream refused (a stale replica's, a cancel that
// lost), and the stream may not answer with the record it just took for a
// moment; the stored record is the one that stands.
func (c *Client) storedRecord(ctx context.Context, requestID string) (*schemas.OutcomeEvent, error) {
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		rec, err := c.Record(ctx, requestID)
		if !errors.Is(err, wire.ErrNoOutcome) {
			return rec, err
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
			return nil, fmt.Errorf("await request %s: %w", requestID, context.Cause(ctx))
		}
	}
}

// Record returns requestID's terminal record now, or an error matching
// wire.ErrNoOutcome when it has none.
func (c *Client) Record(ctx context.Context, requestID string) (*schemas.OutcomeEvent, error) {
	return c.records.Lookup(ctx, requestID)
}

// Output reads the persona's output a record carries.
func (c *Client) Output(ctx context.Context, rec *schemas.OutcomeEvent) ([]byte, error) {
	return c.records.ReadOutput(ctx, rec)
}

func (c *Client) result(ctx context.Context, rec *schemas.OutcomeEvent) (*Result, error) {
	if rec.Outcome != schemas.OutcomeSucceeded {
		return nil, &StoppedError{Record: rec}
	}
	out, err := c.Output(ctx, rec)
	if err != nil {
		return nil, err
	}
	return &Result{Record: rec, Output: out}, nil
}

// attemptDrain bounds the wait, once the terminal record is read, for the
// attempt events of its last attempt: they are published beside the
// record, off its write's path, and may come just after it (or never, for
// a request that ended without running).
const attemptDrain = time.Second

// attemptFollower passes a request's attempt events on and remembers the
// last attempt seen ending, so Await returns only once the events of the
// record's last attempt were passed on.
type attemptFollower struct {
	stop func()

	mu    sync.Mutex
	ended int // highest attempt seen failed or cancelled
	begun int // highest attempt seen started
	seen  chan struct{}
}

func (c *Client) followAttempts(ctx context.Context, requestID string, f func(*schemas.AttemptEvent)) (*attemptFollower, error) {
	a := &attemptFollower{seen: make(chan struct{}, 1)}
	stop, err := c.follow(ctx, c.topo.AttemptsStream, c.topo.AttemptFilter(requestID), func(m jetstream.Msg) {
		ev, err := schemas.DecodeAttemptEvent(m.Data())
		if err != nil {
			return
		}
		f(ev)
		a.note(ev)
	})
	if err != nil {
		return nil, err
	}
	a.stop = stop
	return a, nil
}

func (a *attemptFollower) note(ev *schemas.AttemptEvent) {
	a.mu.Lock()
	switch ev.Kind {
	case schemas.AttemptFailed, schemas.AttemptCancelled:
		a.ended = max(a.ended, ev.Attempt)
	case schemas.AttemptStarted:
		a.begun = max(a.begun, ev.Attempt)
	}
	a.mu.Unlock()
	select {
	case a.seen <- struct{}{}:
	default:
	}
}

// caughtUp reports whether the events of rec's last attempt were passed
// on: its failure (or cancel) when the request did not succeed, its start
// when it did (a success has no attempt event of its own).
func (a *attemptFollower) caughtUp(rec *schemas.OutcomeEvent) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	if rec.Outcome == schemas.OutcomeSucceeded {
		return a.begun >= rec.Attempts
	}
	return a.ended >= rec.Attempts
}

// drain waits, at most attemptDrain, until the events of rec's last attempt
// were passed on.
func (a *attemptFollower) drain(ctx context.Context, rec *schemas.OutcomeEvent) {
	if rec.Attempts <= 0 {
		return
	}
	t := time.NewTimer(attemptDrain)
	defer t.Stop()
	for !a.caughtUp(rec) {
		select {
		case <-a.seen:
		case <-t.C:
			return
		case <-ctx.Done():
			return
		}
	}
}

// follow runs an ordered consumer on stream's subject filter from its first
// message; stop ends it. Once stop has returned, f is not running and is
// never called again: the consumer's own Stop does not wait for a callback
// under way, and a caller's OnAttempt must not outlive Await.
func (c *Client) follow(ctx context.Context, stream, filter string, f func(jetstream.Msg)) (func(), error) {
	cons, err := c.js.OrderedConsumer(ctx, stream, jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{filter}, DeliverPolicy: jetstream.DeliverAllPolicy,
	})
	if err != nil {
		return nil, fmt.Errorf("follow %s on %s: %w", filter, stream, err)
	}
	var mu sync.Mutex
	stopped := false
	cc, err := cons.Consume(func(m jetstream.Msg) {
		mu.Lock()
		defer mu.Unlock()
		if !stopped {
			f(m)
		}
	})
	if err != nil {
		return nil, fmt.Errorf("follow %s on %s: %w", filter, stream, err)
	}
	return func() {
		cc.Stop()
		mu.Lock()
		stopped = true
		mu.Unlock()
	}, nil
}
