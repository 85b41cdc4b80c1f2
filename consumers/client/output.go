package client

import (
	"context"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/personaq/personaq/schemas"
)

// outputDrain bounds how long Await, once the record is in, waits for the
// output chunks stored before it (the final chunk is published just before
// the record, on another stream).
const outputDrain = 2 * time.Second

// OnOutput calls f with each live output chunk of the request (see
// schemas.OutputChunk): the text its attempts write while they run, in
// order, from the first (chunks published before the call included), each
// once. A chunk with Supersedes set opens a retry after an attempt that
// wrote output: discard what you show of attempts up to that number. Await
// returns after the chunks stored before the terminal record were passed
// to f (waiting up to 2 s for them). f runs on one goroutine.
func OnOutput(f func(*schemas.OutputChunk)) AwaitOption {
	return func(o *awaitOptions) { o.onOutput = f }
}

// outputFollower passes a request's chunks on to a caller's f: each stream
// sequence once (the ordered consumer re-creates itself after a
// reconnect, from where it stood), a retry's opening marker only when an
// earlier attempt's output was passed on.
type outputFollower struct {
	f func(*schemas.OutputChunk)

	mu   sync.Mutex
	seq  uint64 // the last stream sequence passed on
	open bool   // the last chunk passed on awaits its attempt's final chunk
	// wrote: an attempt whose output was passed on, not superseded since.
	wrote bool
	moved chan struct{} // closed and replaced whenever seq or open change
}

func newOutputFollower(f func(*schemas.OutputChunk)) *outputFollower {
	return &outputFollower{f: f, moved: make(chan struct{})}
}

func (o *outputFollower) take(m jetstream.Msg) {
	md, err := m.Metadata()
	if err != nil {
		return
	}
	c, err := schemas.DecodeOutputChunk(m.Data())
	o.mu.Lock()
	defer o.mu.Unlock()
	if md.Sequence.Stream <= o.seq {
		return // seen before a reconnect
	}
	o.seq = md.Sequence.Stream
	defer o.wake()
	if err != nil {
		return
	}
	if c.Supersedes > 0 {
		o.open = false
		if !o.wrote {
			return // nothing shown to void
		}
		o.wrote = false
	} else {
		o.open, o.wrote = !c.Final, true
	}
	o.f(c)
}

func (o *outputFollower) wake() {
	close(o.moved)
	o.moved = make(chan struct{})
}

// drain waits until the chunk at upTo was passed on and the last attempt's
// final chunk too, at most outputDrain.
func (o *outputFollower) drain(ctx context.Context, upTo uint64) {
	timeout := time.NewTimer(outputDrain)
	defer timeout.Stop()
	for {
		o.mu.Lock()
		done, moved := o.seq >= upTo && !o.open, o.moved
		o.mu.Unlock()
		if done {
			return
		}
		select {
		case <-moved:
		case <-timeout.C:
			return
		case <-ctx.Done():
			return
		}
	}
}

// followOutput follows requestID's output stream into f; the returned
// drain waits for what was stored up to now, stop ends it.
func (c *Client) followOutput(ctx context.Context, requestID string, f func(*schemas.OutputChunk)) (drain func(context.Context), stop func(), err error) {
	o := newOutputFollower(f)
	stop, err = c.follow(ctx, c.topo.Output.Stream, c.topo.OutputFilter(requestID), o.take)
	if err != nil {
		return nil, nil, err
	}
	drain = func(ctx context.Context) {
		o.drain(ctx, c.lastOutputSeq(ctx, requestID))
	}
	return drain, stop, nil
}

// lastOutputSeq is the stream sequence of requestID's last output chunk
// (0 when none, or when it cannot be read: the drain then waits only for
// an open attempt's final chunk).
func (c *Client) lastOutputSeq(ctx context.Context, requestID string) uint64 {
	s, err := c.js.Stream(ctx, c.topo.Output.Stream)
	if err != nil {
		return 0
	}
	raw, err := s.GetLastMsgForSubject(ctx, c.topo.OutputFilter(requestID))
	if err != nil {
		return 0
	}
	return raw.Sequence
}
