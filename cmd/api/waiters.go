package api

import (
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/rs/zerolog"

	"github.com/personaq/personaq/consumers/wire"
	"github.com/personaq/personaq/schemas"
)

// waiters wakes every long-poll and event stream waiting for a request's
// terminal record, from ONE wildcard core-NATS subscription on the
// outcomes subjects (not one per request). A waiter registers before it
// looks the record up, so a record written in between is not missed; after
// a reconnect (records may have been written meanwhile) every waiter is
// told to look again.
//
// The subscription can see a record before the stream answers a lookup
// with it (the server hands it to subscribers and stores it in parallel),
// so records seen in the last few seconds are kept (recent) and a waiter
// registering gets one at once.
type waiters struct {
	log    zerolog.Logger
	mu     sync.Mutex
	byKey  map[string]map[*waiter]struct{}
	sub    *nats.Subscription
	recent recentRecords
	// seen, when set, is given every record the subscription delivers
	// (the request index). Set before subscribe.
	seen func([]byte)
}

// Bounds of the records kept for waiters that register just after them.
const (
	recentTTL   = 5 * time.Second
	recentBytes = 16 << 20
)

// recentRecords keeps the raw records seen in the last recentTTL, at most
// recentBytes of them, oldest dropped first.
type recentRecords struct {
	byKey map[string]recentRecord
	order []recentEntry
	bytes int
}

type recentRecord struct {
	data []byte
	at   time.Time
}

type recentEntry struct {
	key string
	at  time.Time
}

func (r *recentRecords) put(key string, data []byte, now time.Time) {
	if r.byKey == nil {
		r.byKey = map[string]recentRecord{}
	}
	if old, ok := r.byKey[key]; ok {
		r.bytes -= len(old.data)
	}
	r.byKey[key] = recentRecord{data: data, at: now}
	r.bytes += len(data)
	r.order = append(r.order, recentEntry{key: key, at: now})
	for len(r.order) > 0 && (r.bytes > recentBytes || now.Sub(r.order[0].at) > recentTTL) {
		e := r.order[0]
		r.order = r.order[1:]
		if cur, ok := r.byKey[e.key]; ok && cur.at.Equal(e.at) { // its latest put
			r.bytes -= len(cur.data)
			delete(r.byKey, e.key)
		}
	}
}

func (r *recentRecords) get(key string) []byte { return r.byKey[key].data }

// waiter is one caller waiting for one request's record. wake carries the
// record, or nil for "look it up again".
type waiter struct {
	key  string
	wake chan *schemas.OutcomeEvent
	// fire, when set (a parked long-poll), is called instead, on a
	// goroutine of its own.
	fire func(*schemas.OutcomeEvent)
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
	w := &waiter{key: wire.RequestKey(requestID), wake: make(chan *schemas.OutcomeEvent, 1)}
	ws.mu.Lock()
	set := ws.byKey[w.key]
	if set == nil {
		set = map[*waiter]struct{}{}
		ws.byKey[w.key] = set
	}
	set[w] = struct{}{}
	data := ws.recent.get(w.key)
	ws.mu.Unlock()
	if data != nil { // seen just before: the stream may not answer with it yet
		if rec, err := schemas.DecodeOutcome(data); err == nil {
			w.notify(rec)
		}
	}
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
	if ws.seen != nil {
		ws.seen(m.Data)
	}
	key := m.Subject[strings.LastIndexByte(m.Subject, '.')+1:]
	ws.mu.Lock()
	ws.recent.put(key, m.Data, time.Now())
	set := ws.byKey[key]
	if len(set) == 0 {
		ws.mu.Unlock()
		return
	}
	targets := make([]target, 0, len(set))
	for w := range set {
		targets = append(targets, target{w, w.fire})
	}
	ws.mu.Unlock()
	rec, err := schemas.DecodeOutcome(m.Data)
	if err != nil {
		ws.log.Warn().Err(err).Str("subject", m.Subject).Msg("api: undecodable terminal record; waiters look it up instead")
		rec = nil
	}
	for _, t := range targets {
		t.w.notifyWith(t.fire, rec)
	}
}

// target is a waiter with its callback as read under the lock.
type target struct {
	w    *waiter
	fire func(*schemas.OutcomeEvent)
}

// setFire makes w a parked waiter, called back instead of woken.
func (ws *waiters) setFire(w *waiter, f func(*schemas.OutcomeEvent)) {
	ws.mu.Lock()
	w.fire = f
	ws.mu.Unlock()
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

// notify wakes w; called with the waiters' lock held or before w is
// shared.
func (w *waiter) notify(rec *schemas.OutcomeEvent) { w.notifyWith(w.fire, rec) }

// notifyWith calls fire back (on its own goroutine) or wakes w without
// blocking; a record is kept over a pending nil.
func (w *waiter) notifyWith(fire func(*schemas.OutcomeEvent), rec *schemas.OutcomeEvent) {
	if fire != nil {
		go fire(rec)
		return
	}
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
