package console

import "sync"

// ring keeps the newest events and hands them to subscribers; a slow
// subscriber loses events rather than slowing the feed.
type ring struct {
	mu     sync.Mutex
	events []liveEvent
	max    int
	next   uint64
	subs   map[chan liveEvent]struct{}
}

func newRing(max int) *ring {
	return &ring{max: max, subs: map[chan liveEvent]struct{}{}}
}

// add numbers e, keeps it and sends it to every subscriber.
func (r *ring) add(e liveEvent) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.next++
	e.ID = r.next
	r.events = append(r.events, e)
	if len(r.events) > r.max {
		r.events = r.events[len(r.events)-r.max:]
	}
	for ch := range r.subs {
		select {
		case ch <- e:
		default:
		}
	}
}

// subscribe returns the kept events numbered above after, oldest first, and
// a channel of the events that follow, with no gap between them.
func (r *ring) subscribe(after uint64) ([]liveEvent, chan liveEvent) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var backlog []liveEvent
	for _, e := range r.events {
		if e.ID > after {
			backlog = append(backlog, e)
		}
	}
	ch := make(chan liveEvent, 256)
	r.subs[ch] = struct{}{}
	return backlog, ch
}

func (r *ring) unsubscribe(ch chan liveEvent) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.subs, ch)
}

// recent returns up to n newest events, newest first, and the newest id.
func (r *ring) recent(n int) ([]liveEvent, uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	k := min(n, len(r.events))
	out := make([]liveEvent, k)
	for i := range k {
		out[i] = r.events[len(r.events)-1-i]
	}
	return out, r.next
}
