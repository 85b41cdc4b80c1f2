package console

import (
	"sync"
	"time"
)

// counts keeps per persona and minute how many requests succeeded, how
// many stopped (every other terminal outcome) and how many failed attempts
// were retried, for the last window.
type counts struct {
	mu     sync.Mutex
	window time.Duration
	now    func() time.Time
	by     map[string]map[int64]*minute
}

type minute struct{ ok, stopped, retries int }

// hourStats sums a persona's counts over the window.
type hourStats struct{ Succeeded, Stopped, Retries int }

func newCounts(window time.Duration, now func() time.Time) *counts {
	return &counts{window: window, now: now, by: map[string]map[int64]*minute{}}
}

func (c *counts) add(e liveEvent) {
	if e.Kind == "attempt" && !e.retry {
		return
	}
	m := e.At.Unix() / 60
	if e.At.Before(c.now().Add(-c.window)) {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	per := c.by[e.Persona]
	if per == nil {
		per = map[int64]*minute{}
		c.by[e.Persona] = per
	}
	b := per[m]
	if b == nil {
		b = &minute{}
		per[m] = b
	}
	switch {
	case e.retry:
		b.retries++
	case e.stopped:
		b.stopped++
	default:
		b.ok++
	}
}

// series returns a persona's minutes over the window, oldest first, and
// drops what fell out of it.
func (c *counts) series(persona string) []minute {
	n := int(c.window / time.Minute)
	last := c.now().Unix() / 60
	out := make([]minute, n)
	c.mu.Lock()
	defer c.mu.Unlock()
	for m, b := range c.by[persona] {
		if i := n - 1 - int(last-m); i >= 0 && i < n {
			out[i] = *b
		} else if m < last-int64(n) {
			delete(c.by[persona], m)
		}
	}
	return out
}

func sum(series []minute) hourStats {
	var h hourStats
	for _, m := range series {
		h.Succeeded += m.ok
		h.Stopped += m.stopped
		h.Retries += m.retries
	}
	return h
}
