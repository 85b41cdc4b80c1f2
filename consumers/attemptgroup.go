package consumers

import "sync"

// attemptGroup counts the goroutines that run handlers (invokeApart), so
// that Run returns only once they have. Unlike a sync.WaitGroup it can be
// closed: a delivery whose stages before the handler outlived the router's
// drain (a hung ledger call, say) must not start a handler once Run waits,
// and a WaitGroup's Add may not race its Wait.
type attemptGroup struct {
	mu     sync.Mutex
	n      int
	closed bool
	idle   chan struct{} // made by close; closed once n is 0
}

// add counts one more handler goroutine; false once the group is closed:
// the handler is not to start.
func (g *attemptGroup) add() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return false
	}
	g.n++
	return true
}

// done ends one counted goroutine.
func (g *attemptGroup) done() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.n--
	if g.n == 0 && g.closed {
		close(g.idle)
	}
}

// close refuses further adds and returns a channel closed once every
// counted goroutine is done.
func (g *attemptGroup) close() <-chan struct{} {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.closed {
		g.closed = true
		g.idle = make(chan struct{})
		if g.n == 0 {
			close(g.idle)
		}
	}
	return g.idle
}
