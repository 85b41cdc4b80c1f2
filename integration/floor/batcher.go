package floor

import (
	"context"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/personaq/personaq/consumers/streams"
)

// batcher group-commits records as the runtime's terminal record writer
// does, without its fallbacks (every request is new here, so no
// expectation is refused): a record goes out at once when no commit is in
// flight; while one is, records queue and go out together when it
// returns, as one atomic batch of at most BatchMax, or one by one when
// fewer than BatchMin queued.
type batcher struct {
	nc *nats.Conn
	js jetstream.JetStream

	mu       sync.Mutex
	queue    []pending
	inflight bool
}

type pending struct {
	msg  *nats.Msg
	done chan error
}

// write stores msg and returns when it is confirmed.
func (b *batcher) write(ctx context.Context, msg *nats.Msg) error {
	p := pending{msg: msg, done: make(chan error, 1)}
	b.mu.Lock()
	b.queue = append(b.queue, p)
	if !b.inflight {
		b.flushLocked()
	}
	b.mu.Unlock()
	select {
	case err := <-p.done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (b *batcher) flushLocked() {
	n := min(len(b.queue), BatchMax)
	batch := b.queue[:n:n]
	b.queue = b.queue[n:]
	b.inflight = true
	go func() {
		b.commit(batch)
		b.mu.Lock()
		defer b.mu.Unlock()
		b.inflight = false
		if len(b.queue) > 0 {
			b.flushLocked()
		}
	}()
}

func (b *batcher) commit(batch []pending) {
	ctx, cancel := context.WithTimeout(context.Background(), batchTimeout)
	defer cancel()
	if len(batch) >= BatchMin {
		msgs := make([]*nats.Msg, len(batch))
		for i, p := range batch {
			msgs[i] = p.msg
		}
		_, err := streams.PublishAtomic(ctx, b.nc, msgs)
		for _, p := range batch {
			p.done <- err
		}
		return
	}
	var wg sync.WaitGroup
	for _, p := range batch {
		wg.Go(func() {
			_, err := b.js.PublishMsg(ctx, p.msg)
			p.done <- err
		})
	}
	wg.Wait()
}

// batchTimeout bounds one commit.
const batchTimeout = 10 * time.Second
