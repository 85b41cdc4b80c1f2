package ledger

import (
	"context"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/personaq/personaq/consumers/rdb"
)

// pipe sends the script calls of concurrent callers to Redis together, as
// one pipeline: the runtime's workers (64 by default) each call Begin and
// Finish, and one write and one read for a batch of calls costs both the
// client and redis-server far fewer syscalls than one of each per call.
// Each script still runs atomically; calls of different callers were never
// ordered, and one caller's calls still run in its order.
//
// There is no background goroutine: a caller that finds no batch in
// flight sends one (itself and whoever queued meanwhile); callers that
// arrive while it is in flight queue, and when it returns the sender hands
// the queue to the first of them, so no caller sends more than one batch.
// A lone caller pays no wait: its batch of one is sent at once.
type pipe struct {
	client redis.UniversalClient
	// direct sends every call on its own, as Script.Run does: on Cluster,
	// where a pipeline is split by node anyway, and where batched calls
	// that met a slot migration (TRYAGAIN, ASK) kept the nodes from
	// settling (TestLedgerClusterReshardAndFailover).
	direct bool

	mu    sync.Mutex
	busy  bool
	queue []*call
}

func newPipe(c redis.UniversalClient) *pipe {
	_, cluster := c.(*redis.ClusterClient)
	return &pipe{client: c, direct: cluster}
}

// call is one script call in a pipe.
type call struct {
	rdb.Call
	// deadline is the caller's, or zero.
	deadline time.Time

	// wake gets true when the call was sent (cmd holds its reply), false
	// when its caller is to send the queue.
	wake chan bool
	// lead is set (under pipe.mu) when the call's caller is to send the
	// next batch.
	lead bool
	// alone is the batch of a caller that found the pipe idle.
	alone [1]*call
}

// calls are reused (each call and its channel were two allocations per
// Begin and Finish): run takes one and gives it back when its reply is
// in, when no batch and no queue refers to it any more.
var calls = sync.Pool{New: func() any { return &call{wake: make(chan bool, 1)} }}

// maxBatch bounds how many calls one pipeline carries, so one batch cannot
// hold a connection (and its callers) much longer than a single call.
const maxBatch = 64

// run sends the call (in a batch, possibly) and returns its reply.
func (p *pipe) run(ctx context.Context, script *redis.Script, keys []string, args ...any) *redis.Cmd {
	if p.direct {
		return script.Run(ctx, p.client, keys, args...)
	}
	c := calls.Get().(*call)
	c.Call = rdb.Call{Script: script, Keys: keys, Args: args}
	c.deadline, _ = ctx.Deadline()
	cmd := p.wait(ctx, c)
	// A caller that sent a batch woke its own call too: that wake-up is
	// the only one still buffered.
	select {
	case <-c.wake:
	default:
	}
	*c = call{wake: c.wake}
	calls.Put(c)
	return cmd
}

// wait queues c, or sends it, and returns its reply.
func (p *pipe) wait(ctx context.Context, c *call) *redis.Cmd {
	p.mu.Lock()
	if !p.busy {
		p.busy = true
		p.mu.Unlock()
		c.alone[0] = c
		p.lead(ctx, c.alone[:])
		return c.Cmd
	}
	p.queue = append(p.queue, c)
	p.mu.Unlock()
	select {
	case sent := <-c.wake:
		if !sent {
			p.lead(ctx, nil)
		}
		return c.Cmd
	case <-ctx.Done():
	}
	// Given up: leave the queue if still in it. A call already taken into a
	// batch, or made the next sender, is waited for: the batch is bounded
	// by the client's timeouts, and a sender must not walk away.
	p.mu.Lock()
	for i, q := range p.queue {
		if q == c && !c.lead {
			p.queue = append(p.queue[:i], p.queue[i+1:]...)
			p.mu.Unlock()
			cmd := redis.NewCmd(ctx)
			cmd.SetErr(context.Cause(ctx))
			return cmd
		}
	}
	p.mu.Unlock()
	if sent := <-c.wake; !sent {
		p.lead(ctx, nil)
	}
	return c.Cmd
}

// lead sends batch plus what is queued (up to maxBatch), then hands the
// rest of the queue to its first caller, or marks the pipe idle.
func (p *pipe) lead(ctx context.Context, batch []*call) {
	p.mu.Lock()
	n := min(len(p.queue), maxBatch-len(batch))
	batch = append(batch, p.queue[:n]...)
	p.queue = append(p.queue[:0], p.queue[n:]...)
	p.mu.Unlock()

	p.send(ctx, batch)

	p.mu.Lock()
	if len(p.queue) == 0 {
		p.busy = false
	} else {
		// The first queued caller sends the next batch, its own call in it;
		// it stays queued, marked so that giving up cannot take it out.
		p.queue[0].lead = true
		p.queue[0].wake <- false
	}
	p.mu.Unlock()
	for _, c := range batch {
		c.wake <- true
	}
}

// send runs batch's calls (rdb.Pipeline: one pipeline when there are
// several, NOSCRIPT answered with EVAL).
func (p *pipe) send(ctx context.Context, batch []*call) {
	calls := make([]*rdb.Call, len(batch))
	for i, c := range batch {
		calls[i] = &c.Call
	}
	if len(batch) == 1 {
		rdb.Pipeline(ctx, p.client, calls)
		return
	}
	// The batch runs for every caller in it: the sender's cancellation
	// must not fail the others; the latest deadline of the batch bounds it.
	bctx := context.WithoutCancel(ctx)
	var latest time.Time
	for _, c := range batch {
		if c.deadline.IsZero() {
			latest = time.Time{}
			break
		}
		if c.deadline.After(latest) {
			latest = c.deadline
		}
	}
	if !latest.IsZero() {
		var cancel context.CancelFunc
		bctx, cancel = context.WithDeadline(bctx, latest)
		defer cancel()
	}
	rdb.Pipeline(bctx, p.client, calls)
}
