package api

import (
	"fmt"
	"strings"
	"sync"

	"github.com/nats-io/nats.go"
	"github.com/rs/zerolog"

	"github.com/personaq/personaq/consumers"
	"github.com/personaq/personaq/schemas"
)

// waiters wakes every long-poll and event stream waiting for a request's
// terminal record, from ONE wildcard core-NATS subscription on the
// outcomes subjects (not one per request). A waiter registers before it
// looks the record up, so a record written in between is not missed; after
// a reconnect (records may have been written meanwhile) every waiter is
// told to look again.
type waiters struct {
	log   zerolog.Logger
	mu    sync.Mutex
	byKey map[string]map[*waiter]struct{}
	sub   *nats.Subscription
}

// waiter is one caller waiting for one request's record. wake carries the
// record, or nil for "look it up again".
type waiter struct {
	key  string
	wake chan *schemas.OutcomeEvent
}

func newWaiters(log zerolog.Logger) *waiters {
	return &waiters{log: log, byKey: map[string]map[*waiter]struct{}{}}
}

// subscribe starts the one subscription on prefix.>.
func (ws *waiters) subscribe(nc *nats.Conn, prefix string) error {
	sub, err := nc.Subscribe(prefix+".>", ws.deliver)
	if err != nil {
		return fmt.Errorf("api: subscribe %s.>: %w", prefix, err)
	}
	// Every terminal record of the deployment passes here: never drop one
	// for a slow consumer (a waiter would then wait its whole wait).
	if err := sub.SetPendingLimits(-1, -1); err != nil {
		_ = sub.Unsubscribe()
		return fmt.Errorf("api: subscribe %s.>: %w", prefix, err)
	}
	ws.sub = sub
	return nil
}

func (ws *waiters) stop() {
	if ws.sub != nil {
		_ = ws.sub.Unsubscribe()
	}
}

// add registers a waiter for requestID; remove it when done.
func (ws *waiters) add(requestID string) *waiter {
	w := &waiter{key: consumers.RequestKey(requestID), wake: make(chan *schemas.OutcomeEvent, 1)}
	ws.mu.Lock()
	set := ws.byKey[w.key]
	if set == nil {
		set = map[*waiter]struct{}{}
		ws.byKey[w.key] = set
	}
	set[w] = struct{}{}
	ws.mu.Unlock()
	return w
}

func (ws *waiters) remove(w *waiter) {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	set := ws.byKey[w.key]
	delete(set, w)
	if len(set) == 0 {
		delete(ws.byKey, w.key)
	}
}

// count is the number of registered waiters.
func (ws *waiters) count() int {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	n := 0
	for _, set := range ws.byKey {
		n += len(set)
	}
	return n
}

// deliver hands a record to the waiters of its request (the last subject
// token is the request key); records nobody waits for are not decoded.
func (ws *waiters) deliver(m *nats.Msg) {
	key := m.Subject[strings.LastIndexByte(m.Subject, '.')+1:]
	ws.mu.Lock()
	set := ws.byKey[key]
	if len(set) == 0 {
		ws.mu.Unlock()
		return
	}
	targets := make([]*waiter, 0, len(set))
	for w := range set {
		targets = append(targets, w)
	}
	ws.mu.Unlock()
	rec, err := schemas.DecodeOutcome(m.Data)
	if err != nil {
		ws.log.Warn().Err(err).Str("subject", m.Subject).Msg("api: undecodable terminal record; waiters look it up instead")
		rec = nil
	}
	for _, w := range targets {
		w.notify(rec)
	}
}

// recheckAll tells every waiter to look its record up again (after a
// reconnect, records may have been written while the subscription was
// gone).
func (ws *waiters) recheckAll() {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	for _, set := range ws.byKey {
		for w := range set {
			w.notify(nil)
		}
	}
}

// notify wakes w without blocking; a record is kept over a pending nil.
func (w *waiter) notify(rec *schemas.OutcomeEvent) {
	select {
	case w.wake <- rec:
		return
	default:
	}
	if rec == nil {
		return
	}
	select { // replace a pending "look again" with the record itself
	case <-w.wake:
	default:
	}
	select {
	case w.wake <- rec:
	default:
	}
}
