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
	c  coalescer[*nats.Msg]
}

func newBatcher(nc *nats.Conn, js jetstream.JetStream) *batcher {
	b := &batcher{nc: nc, js: js}
	b.c = coalescer[*nats.Msg]{max: BatchMax, send: b.commit}
	return b
}

// write stores msg and returns when it is confirmed.
func (b *batcher) write(ctx context.Context, msg *nats.Msg) error { return b.c.do(ctx, msg) }

func (b *batcher) commit(batch []pending[*nats.Msg]) {
	ctx, cancel := context.WithTimeout(context.Background(), batchTimeout)
	defer cancel()
	if len(batch) >= BatchMin {
		msgs := make([]*nats.Msg, len(batch))
		for i, p := range batch {
			msgs[i] = p.item
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
			_, err := b.js.PublishMsg(ctx, p.item)
			p.done <- err
		})
	}
	wg.Wait()
}

// batchTimeout bounds one commit.
const batchTimeout = 10 * time.Second
