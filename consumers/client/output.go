package client

import (
	"context"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/personaq/personaq/schemas"
)

const (
	// outputDrain bounds how long Await, once the record is in, waits for
	// the last output chunk stored before it to arrive live (the final
	// chunk is published just before the record, on another stream);
	// after it, the rest is read from the stream.
	outputDrain = 2 * time.Second
	// outputBuffer is how many live chunks wait for the caller's callback;
	// past it the connection drops them and the gap is read back from the
	// stream.
	outputBuffer = 4096
	// catchUpTimeout bounds one read of chunks back from the stream.
	catchUpTimeout = 10 * time.Second
)

// OnOutput calls f with each live output chunk of the request (see
// schemas.OutputChunk): the text its attempts write while they run, in
// order, from the first (chunks published before the call included), each
// once. A chunk with Supersedes set opens a retry after an attempt that
// wrote output: discard what you show of attempts up to that number. Await
// returns after the chunks stored before the terminal record were passed
// to f. f runs on one goroutine.
func OnOutput(f func(*schemas.OutputChunk)) AwaitOption {
	return func(o *awaitOptions) { o.onOutput = f }
}

// Chunks arrive on a core subscription to the request's output subjects,
// not on a JetStream consumer per caller: a filtered consumer on a stream
// where a thousand requests interleave their chunks makes the server scan
// past every other request's chunk for each of its own (measured: 7 s
// behind at 1,000 streaming requests), while a subscription costs a
// subject match. The stream is read only for what the subscription cannot
// have: the chunks published before the call, and a gap (the connection
// dropped some, or reconnected).

// outputFollower passes a request's chunks on to a caller's f, on its own
// goroutine: each once (by attempt and offset, markers by attempt and
// kind), in each attempt's order, a retry's opening marker only when an
// earlier attempt's output was passed on.
type outputFollower struct {
	c         *Client
	requestID string
	f         func(*schemas.OutputChunk)
	live      chan *nats.Msg

	drains chan chan struct{}
	stop   chan struct{}
	done   chan struct{}

	// Owned by the goroutine.
	next  map[int]int64    // per attempt: bytes passed on
	marks map[markKey]bool // markers passed on
	wrote bool             // output passed on, not superseded since
}

// markKey names a marker chunk: a retry's opening ('s'), the cap's ('t'),
// an attempt's final chunk ('f').
type markKey struct {
	attempt int
	kind    byte
}

// followOutput starts following requestID's output into f; drain waits
// for what was stored up to now, stop ends it (f is not called after).
func (c *Client) followOutput(ctx context.Context, requestID string, f func(*schemas.OutputChunk)) (drain func(context.Context), stop func(), err error) {
	o := &outputFollower{c: c, requestID: requestID, f: f, live: make(chan *nats.Msg, outputBuffer),
		drains: make(chan chan struct{}), stop: make(chan struct{}), done: make(chan struct{}),
		next: map[int]int64{}, marks: map[markKey]bool{}}
	sub, err := c.js.Conn().ChanSubscribe(c.topo.OutputFilter(requestID), o.live)
	if err != nil {
		return nil, nil, fmt.Errorf("follow the output of %s: %w", requestID, err)
	}
	go o.run(ctx) // after subscribing: the stream holds whatever came before
	drain = func(ctx context.Context) {
		d := make(chan struct{})
		select {
		case o.drains <- d:
			select {
			case <-d:
			case <-ctx.Done():
			}
		case <-o.done:
		case <-ctx.Done():
		}
	}
	stop = func() {
		_ = sub.Unsubscribe()
		close(o.stop)
		<-o.done
	}
	return drain, stop, nil
}

func (o *outputFollower) run(ctx context.Context) {
	defer close(o.done)
	o.catchUp(ctx, o.c.topo.OutputFilter(o.requestID))
	for {
		select {
		case m := <-o.live:
			o.take(ctx, m.Data, true)
		case d := <-o.drains:
			o.drain(ctx)
			close(d)
		case <-o.stop:
			return
		case <-ctx.Done():
			return
		}
	}
}

// take passes one chunk on unless it was already; a live chunk past a gap
// first has the gap read back from the stream.
func (o *outputFollower) take(ctx context.Context, data []byte, live bool) {
	c, err := schemas.DecodeOutputChunk(data)
	if err != nil {
		return
	}
	switch {
	case c.Supersedes > 0:
		if o.marked(c.Attempt, 's') || !o.wrote {
			return // seen, or nothing shown to void
		}
		o.wrote = false
	case c.Data != "":
		if c.Offset+int64(len(c.Data)) <= o.next[c.Attempt] {
			return // seen
		}
		if live && c.Offset > o.next[c.Attempt] {
			o.catchUp(ctx, o.c.topo.OutputSubject(o.requestID, c.Attempt))
			if c.Offset+int64(len(c.Data)) <= o.next[c.Attempt] {
				return
			}
		}
		o.next[c.Attempt] = c.Offset + int64(len(c.Data))
		o.wrote = true
	default: // the cap's marker, or the final chunk
		kind := byte('t')
		if c.Final {
			kind = 'f'
		}
		if live && c.Offset > o.next[c.Attempt] {
			o.catchUp(ctx, o.c.topo.OutputSubject(o.requestID, c.Attempt))
		}
		if o.marked(c.Attempt, kind) {
			return
		}
		o.wrote = true
	}
	o.f(c)
}

// marked reports whether the marker was passed on, and notes it.
func (o *outputFollower) marked(attempt int, kind byte) bool {
	k := markKey{attempt, kind}
	if o.marks[k] {
		return true
	}
	o.marks[k] = true
	return false
}

// has reports whether chunk c was passed on.
func (o *outputFollower) has(c *schemas.OutputChunk) bool {
	switch {
	case c.Supersedes > 0:
		return o.marks[markKey{c.Attempt, 's'}] || !o.wrote
	case c.Data != "":
		return o.next[c.Attempt] >= c.Offset+int64(len(c.Data))
	case c.Final:
		return o.marks[markKey{c.Attempt, 'f'}]
	}
	return o.marks[markKey{c.Attempt, 't'}]
}

// drain passes on every chunk up to the last one stored now: it waits for
// it to arrive live, then reads what is missing from the stream.
func (o *outputFollower) drain(ctx context.Context) {
	last := o.c.lastOutput(ctx, o.c.topo.OutputFilter(o.requestID))
	if last == nil {
		return
	}
	timeout := time.NewTimer(outputDrain)
	defer timeout.Stop()
	for !o.has(last) {
		select {
		case m := <-o.live:
			o.take(ctx, m.Data, true)
		case <-timeout.C:
			o.catchUp(ctx, o.c.topo.OutputFilter(o.requestID))
			return
		case <-ctx.Done():
			return
		}
	}
}

// catchUp reads the chunks on subject from the stream, up to the last one
// stored now, passing on those not passed on yet.
func (o *outputFollower) catchUp(ctx context.Context, subject string) {
	upTo := o.c.lastOutputSeq(ctx, subject)
	if upTo == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, catchUpTimeout)
	defer cancel()
	cons, err := o.c.js.OrderedConsumer(ctx, o.c.topo.Output.Stream, jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{subject}, DeliverPolicy: jetstream.DeliverAllPolicy})
	if err != nil {
		return
	}
	it, err := cons.Messages()
	if err != nil {
		return
	}
	defer it.Stop()
	go func() { <-ctx.Done(); it.Stop() }()
	for {
		m, err := it.Next()
		if err != nil {
			return
		}
		md, err := m.Metadata()
		if err != nil {
			return
		}
		o.take(ctx, m.Data(), false)
		if md.Sequence.Stream >= upTo {
			return
		}
	}
}

// lastOutputSeq is the stream sequence of the last chunk on subject (0
// when none, or when it cannot be read).
func (c *Client) lastOutputSeq(ctx context.Context, subject string) uint64 {
	raw, err := c.lastOutputMsg(ctx, subject)
	if err != nil {
		return 0
	}
	return raw.Sequence
}

// lastOutput is the last chunk on subject (nil when none).
func (c *Client) lastOutput(ctx context.Context, subject string) *schemas.OutputChunk {
	raw, err := c.lastOutputMsg(ctx, subject)
	if err != nil {
		return nil
	}
	ch, err := schemas.DecodeOutputChunk(raw.Data)
	if err != nil {
		return nil
	}
	return ch
}

func (c *Client) lastOutputMsg(ctx context.Context, subject string) (*jetstream.RawStreamMsg, error) {
	s, err := c.js.Stream(ctx, c.topo.Output.Stream)
	if err != nil {
		return nil, err
	}
	raw, err := s.GetLastMsgForSubject(ctx, subject)
	if err != nil {
		return nil, err
	}
	return raw, nil
}
