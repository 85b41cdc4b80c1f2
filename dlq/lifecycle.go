package dlq

import (
	"context"
	"sync"
)

// lifecycle is the Start/Stop shape every background loop here shares:
// Start runs the loops until its ctx is done or Stop is called; Stop is
// idempotent, safe before Start, and waits for the loops to return.
type lifecycle struct {
	mu      sync.Mutex
	started bool
	cancel  context.CancelFunc
	onStop  func()
	once    sync.Once
	wg      sync.WaitGroup
}

// start runs loops with a context that ends on ctx's end or on stop;
// onStop (optional) runs once when they are asked to end. It reports false
// when already started.
func (lc *lifecycle) start(ctx context.Context, onStop func(), loops ...func(context.Context)) bool {
	lc.mu.Lock()
	defer lc.mu.Unlock()
	if lc.started {
		return false
	}
	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	lc.started, lc.cancel, lc.onStop = true, cancel, onStop
	lc.wg.Add(1 + len(loops))
	go func() {
		defer lc.wg.Done()
		select {
		case <-ctx.Done():
			lc.shutdown()
		case <-runCtx.Done():
		}
	}()
	for _, loop := range loops {
		go func() {
			defer lc.wg.Done()
			loop(runCtx)
		}()
	}
	return true
}

func (lc *lifecycle) shutdown() {
	lc.once.Do(func() {
		lc.cancel()
		if lc.onStop != nil {
			lc.onStop()
		}
	})
}

func (lc *lifecycle) stop() {
	lc.mu.Lock()
	started := lc.started
	lc.mu.Unlock()
	if started {
		lc.shutdown()
		lc.wg.Wait()
	}
}
