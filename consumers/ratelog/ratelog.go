// Package ratelog lets a repeated log line through once per interval and
// counts the copies it held back, so an outage that fails the same call
// several times a second writes one line every interval, not hundreds.
package ratelog

import (
	"sync"
	"time"
)

// DefaultInterval is how often a repeated line is let through by default.
const DefaultInterval = 30 * time.Second

// Limiter decides which copies of a repeated line are written. The zero
// value is not usable; make one with New. Safe for concurrent use.
type Limiter struct {
	every time.Duration
	now   func() time.Time

	mu   sync.Mutex
	keys map[string]*entry
}

type entry struct {
	last       time.Time
	suppressed int
}

// New returns a Limiter that lets one line per key through every interval
// (DefaultInterval when interval ≤ 0).
func New(interval time.Duration) *Limiter {
	if interval <= 0 {
		interval = DefaultInterval
	}
	return &Limiter{every: interval, now: time.Now, keys: map[string]*entry{}}
}

// Allow reports whether the line named key is written now and, when it
// is, how many copies were held back since the last one written.
func (l *Limiter) Allow(key string) (ok bool, suppressed int) {
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	e := l.keys[key]
	if e == nil {
		if len(l.keys) >= maxKeys {
			clear(l.keys) // a bound on memory: keys are meant to be few
		}
		l.keys[key] = &entry{last: now}
		return true, 0
	}
	if now.Sub(e.last) < l.every {
		e.suppressed++
		return false, 0
	}
	n := e.suppressed
	e.last, e.suppressed = now, 0
	return true, n
}

// Reset forgets key, so its next line is written at once (the condition
// it reported ended, and a new one deserves a line of its own).
func (l *Limiter) Reset(key string) {
	l.mu.Lock()
	delete(l.keys, key)
	l.mu.Unlock()
}

// maxKeys bounds how many distinct lines a Limiter remembers.
const maxKeys = 1024
