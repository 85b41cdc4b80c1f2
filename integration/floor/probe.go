package floor

import (
	"context"
	"errors"
	"sync"

	"github.com/redis/go-redis/v9"
)

// probe is Config.RedisProbe's client: each attempt's begin and finish
// are one native write each (SET its key NX with the lease's TTL, then
// DEL it), the cheapest a ledger could send, and the calls of concurrent
// workers go to Redis together, one pipeline (at most probeBatch calls)
// in flight, as the ledger's pipe sends its scripts. What it measures:
// what two Redis round trips per attempt cost the client and
// redis-server, whatever a ledger's scripts do.
type probe struct {
	client redis.UniversalClient

	mu       sync.Mutex
	queue    []probeCall
	inflight bool
}

type probeCall struct {
	args []any
	done chan error
}

// probeBatch is the ledger pipe's bound on calls per pipeline.
const probeBatch = 64

// do sends one command and returns its error when its reply is in.
func (p *probe) do(ctx context.Context, args ...any) error {
	c := probeCall{args: args, done: make(chan error, 1)}
	p.mu.Lock()
	p.queue = append(p.queue, c)
	if !p.inflight {
		p.flushLocked()
	}
	p.mu.Unlock()
	select {
	case err := <-c.done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (p *probe) flushLocked() {
	n := min(len(p.queue), probeBatch)
	batch := p.queue[:n:n]
	p.queue = p.queue[n:]
	p.inflight = true
	go func() {
		p.send(batch)
		p.mu.Lock()
		defer p.mu.Unlock()
		p.inflight = false
		if len(p.queue) > 0 {
			p.flushLocked()
		}
	}()
}

func (p *probe) send(batch []probeCall) {
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	cmds := make([]*redis.Cmd, len(batch))
	_, _ = p.client.Pipelined(ctx, func(pl redis.Pipeliner) error {
		for i, c := range batch {
			cmds[i] = pl.Do(ctx, c.args...)
		}
		return nil
	})
	for i, c := range batch {
		err := cmds[i].Err()
		if errors.Is(err, redis.Nil) {
			err = nil // SET NX of a key that exists: still a round trip
		}
		c.done <- err
	}
}
