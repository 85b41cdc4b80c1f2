package floor

import (
	"context"
	"errors"

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
	c      coalescer[[]any]
}

// probeBatch is the ledger pipe's bound on calls per pipeline.
const probeBatch = 64

func newProbe(client redis.UniversalClient) *probe {
	p := &probe{client: client}
	p.c = coalescer[[]any]{max: probeBatch, send: p.send}
	return p
}

// do sends one command and returns its error when its reply is in.
func (p *probe) do(ctx context.Context, args ...any) error { return p.c.do(ctx, args) }

func (p *probe) send(batch []pending[[]any]) {
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	cmds := make([]*redis.Cmd, len(batch))
	_, _ = p.client.Pipelined(ctx, func(pl redis.Pipeliner) error {
		for i, c := range batch {
			cmds[i] = pl.Do(ctx, c.item...)
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
