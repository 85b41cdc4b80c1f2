package client

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/personaq/personaq/consumers"
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
	if o.onAttempt != nil {
		stop, err := c.followAttempts(ctx, requestID, o.onAttempt)
		if err != nil {
			return nil, err
		}
		defer stop()
	}
	rec, err := c.Record(ctx, requestID)
	if errors.Is(err, consumers.ErrNoOutcome) {
		rec, err = c.waitRecord(ctx, requestID)
	}
	if err != nil {
		return nil, err
	}
	return c.result(ctx, rec)
}

// Record returns requestID's terminal record now, or an error matching
// consumers.ErrNoOutcome when it has none.
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

// waitRecord follows the request's record subject from the start of the
// stream, so a record written between the lookup and now is not missed.
func (c *Client) waitRecord(ctx context.Context, requestID string) (*schemas.OutcomeEvent, error) {
	got := make(chan jetstream.Msg, 1)
	stop, err := c.follow(ctx, c.topo.OutcomesStream, c.topo.OutcomeFilter(requestID), func(m jetstream.Msg) {
		select {
		case got <- m:
		default:
		}
	})
	if err != nil {
		return nil, err
	}
	defer stop()
	select {
	case m := <-got:
		rec, err := schemas.DecodeOutcome(m.Data())
		if err != nil {
			return nil, fmt.Errorf("terminal record of %s: %w", requestID, err)
		}
		return rec, nil
	case <-ctx.Done():
		return nil, fmt.Errorf("await request %s: %w", requestID, context.Cause(ctx))
	}
}

func (c *Client) followAttempts(ctx context.Context, requestID string, f func(*schemas.AttemptEvent)) (func(), error) {
	return c.follow(ctx, c.topo.AttemptsStream, c.topo.AttemptFilter(requestID), func(m jetstream.Msg) {
		if ev, err := schemas.DecodeAttemptEvent(m.Data()); err == nil {
			f(ev)
		}
	})
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
