package loop

import (
	"context"
	"fmt"
	"runtime/debug"
	"sync"
	"time"
)

// Group runs background loops under one lifecycle. The zero Group is
// ready to use; a Group starts once (a Stop does not make it restartable:
// every owner here is built, started and stopped once).
type Group struct {
	// OnPanic, when set, is called from the panicking goroutine with a
	// loop's recovered panic, once the Group's other loops were asked to
	// end (e.g. to log it and drain the owner); Stop and Wait then panic
	// with it. Default: none, and a loop's panic is not recovered: it
	// ends the process at once, as any goroutine's panic does.
	OnPanic func(*PanicError)

	mu      sync.Mutex
	started bool
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	panic   *PanicError
}

// PanicError is a loop's panic recovered for OnPanic, re-raised by Stop
// and Wait.
type PanicError struct {
	// Value is what the loop panicked with.
	Value any
	// Stack is the panicking goroutine's stack.
	Stack []byte
}

func (p *PanicError) Error() string {
	return fmt.Sprintf("background loop panicked: %v\n%s", p.Value, p.Stack)
}

// Unwrap returns the panic value when it is an error.
func (p *PanicError) Unwrap() error {
	err, _ := p.Value.(error)
	return err
}

// Start runs each loop in its own goroutine with a context that ends when
// ctx ends or Stop is called (whichever is first); ctx's values are kept.
// It reports false, starting nothing, when the Group was started before.
func (g *Group) Start(ctx context.Context, loops ...func(context.Context)) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.started {
		return false
	}
	runCtx, cancel := context.WithCancel(ctx)
	g.started, g.cancel = true, cancel
	g.wg.Add(len(loops))
	for _, loop := range loops {
		go g.run(runCtx, loop)
	}
	return true
}

// run runs one loop; with OnPanic, its panic becomes the Group's failure.
func (g *Group) run(ctx context.Context, loop func(context.Context)) {
	defer g.wg.Done()
	if g.OnPanic == nil {
		loop(ctx)
		return
	}
	defer func() {
		v := recover()
		if v == nil {
			return
		}
		p := &PanicError{Value: v, Stack: debug.Stack()}
		g.mu.Lock()
		if g.panic == nil {
			g.panic = p
		}
		g.mu.Unlock()
		g.cancel()
		g.OnPanic(p)
	}()
	loop(ctx)
}

// Stop asks the loops to end and waits until every one has returned. It
// is idempotent, safe to call concurrently, and a no-op before Start.
// When a loop's panic was recovered (OnPanic), Stop panics with it.
func (g *Group) Stop() {
	g.mu.Lock()
	cancel := g.cancel
	g.mu.Unlock()
	if cancel != nil {
		cancel()
	}
	g.Wait()
}

// Wait waits until every loop has returned, without asking them to end.
// When a loop's panic was recovered (OnPanic), Wait panics with it.
func (g *Group) Wait() {
	g.wg.Wait()
	g.mu.Lock()
	p := g.panic
	g.mu.Unlock()
	if p != nil {
		panic(p)
	}
}

// Sleep waits d; false when ctx ended first (at once when it had).
func Sleep(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// Every calls fn every interval (the first call one interval from now)
// until ctx ends; a call that overruns the interval delays the next.
func Every(ctx context.Context, interval time.Duration, fn func()) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			fn()
		}
	}
}
