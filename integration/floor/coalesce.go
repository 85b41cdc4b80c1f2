package floor

import (
	"context"
	"sync"
)

// coalescer sends what concurrent callers hand it in groups, one group
// in flight at a time, as the runtime's record writer and the ledger's
// pipe do: an item goes out at once when nothing is in flight; while a
// group is, items queue and go out together (at most max) when it
// returns. send answers every item of its group.
type coalescer[T any] struct {
	max  int
	send func([]pending[T])

	mu       sync.Mutex
	queue    []pending[T]
	inflight bool
}

// pending is one caller's item and where its answer goes.
type pending[T any] struct {
	item T
	done chan error
}

// do hands v to the next group and returns its answer.
func (c *coalescer[T]) do(ctx context.Context, v T) error {
	p := pending[T]{item: v, done: make(chan error, 1)}
	c.mu.Lock()
	c.queue = append(c.queue, p)
	if !c.inflight {
		c.flushLocked()
	}
	c.mu.Unlock()
	select {
	case err := <-p.done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (c *coalescer[T]) flushLocked() {
	n := min(len(c.queue), c.max)
	group := c.queue[:n:n]
	c.queue = c.queue[n:]
	c.inflight = true
	go func() {
		c.send(group)
		c.mu.Lock()
		defer c.mu.Unlock()
		c.inflight = false
		if len(c.queue) > 0 {
			c.flushLocked()
		}
	}()
}
