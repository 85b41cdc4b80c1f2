package consumers

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/personaq/personaq/consumers/loop"
	"github.com/personaq/personaq/schemas"
)

// A replica learns of cancels without a lookup per delivery: it keeps the
// cancelled requests in memory, read once from the outcomes stream when it
// starts (and again after every reconnect, from a little before the
// connection dropped) and kept current by the live notices: a core-NATS
// subscription on the cancelled records' subjects, which receives each
// record as it is published. (A cancel the server refused, because the
// request had ended first, reaches it too: its attempt, if any, is past
// its own record and settles as that record says.) A delivery is
// then checked against memory, at no cost; only a message published before
// what the memory covers (the replica could not read the stream, or forgot
// old cancels to stay bounded) pays for a lookup of its record, a read and
// never a write. Redeliveries look their record up anyway (begin).
//
// A cancel stored while a delivery is between that check and its handler
// reaches the attempt through its notice: the attempt is stopped at once.

// cancelWatchMax bounds the cancelled requests a replica remembers; past it
// the oldest half is forgotten and messages published before them pay for
// a lookup.
const cancelWatchMax = 100_000

// clockSkew is the margin between the server's publish times and the
// clocks that stamped cancel records.
const clockSkew = 2 * time.Second

// reconnectCheck is how often the watch looks for a reconnect it must
// catch up after.
const reconnectCheck = time.Second

// cancelWatch is one replica's view of cancelled requests, and the attempts
// it runs, so that a cancel stops them.
type cancelWatch struct {
	js   jetstream.JetStream
	topo Topology
	log  zerolog.Logger
	max  int

	mu      sync.Mutex
	records map[string]*schemas.OutcomeEvent
	order   []string
	// horizon: a message published before horizon+clockSkew may have a
	// cancel this replica does not remember (zero: none).
	horizon time.Time
	// forgotten is the newest cancel time forgotten to stay bounded.
	forgotten time.Time
	// running lists the attempts of each request this replica runs: one,
	// almost always (a list, not a map per request: it is kept for as
	// long as the attempt runs).
	running map[string]*trackedRun
}

// trackedRun is one running attempt in cancelWatch.running.
type trackedRun struct {
	w         *cancelWatch
	requestID string
	cancel    context.CancelCauseFunc
	next      *trackedRun
}

func newCancelWatch(js jetstream.JetStream, t Topology, log zerolog.Logger) *cancelWatch {
	return &cancelWatch{js: js, topo: t, log: log, max: cancelWatchMax,
		records: map[string]*schemas.OutcomeEvent{}, running: map[string]*trackedRun{},
		horizon: time.Now()} // until started, every message looks its record up
}

// start subscribes to the notices, then reads the cancels already stored,
// and keeps watching for reconnects until ctx ends. stop waits for it.
func (w *cancelWatch) start(ctx context.Context) (stop func(), err error) {
	nc := w.js.Conn()
	sub, err := nc.Subscribe(w.topo.CancelledFilter(), w.onNotice)
	if err != nil {
		return nil, err
	}
	fctx, cancelFlush := context.WithTimeout(ctx, settleTimeout)
	defer cancelFlush()
	if err := nc.FlushWithContext(fctx); err != nil {
		_ = sub.Unsubscribe()
		return nil, err
	}
	w.catchUp(fctx, time.Time{})
	var g loop.Group
	g.Start(ctx, func(ctx context.Context) { w.watchReconnects(ctx, nc) })
	return func() { g.Stop(); _ = sub.Unsubscribe() }, nil
}

func (w *cancelWatch) onNotice(m *nats.Msg) {
	rec, err := schemas.DecodeOutcome(m.Data)
	if err != nil || rec.Outcome != schemas.OutcomeCancelled {
		w.log.Warn().Err(err).Str("subject", m.Subject).Msg("cancel notice ignored: not a cancelled record")
		return
	}
	w.add(rec)
}

// catchUp reads the cancelled records stored since from (zero: all of
// them). If it cannot, messages published until now look their record up.
func (w *cancelWatch) catchUp(ctx context.Context, from time.Time) {
	began := time.Now()
	n, err := w.readStored(ctx, from)
	if err != nil {
		w.mu.Lock()
		w.horizon = began
		w.mu.Unlock()
		w.log.Warn().Err(err).Msg("cancelled records not read; requests published until now look their record up before running")
		return
	}
	if from.IsZero() {
		w.mu.Lock()
		w.horizon = w.forgotten
		w.mu.Unlock()
	}
	w.log.Debug().Int("cancelled", n).Dur("took", time.Since(began)).Msg("cancelled records read")
}

// readStored adds every cancelled record stored since from.
func (w *cancelWatch) readStored(ctx context.Context, from time.Time) (int, error) {
	cfg := jetstream.OrderedConsumerConfig{FilterSubjects: []string{w.topo.CancelledFilter()}, DeliverPolicy: jetstream.DeliverAllPolicy}
	if !from.IsZero() {
		cfg.DeliverPolicy, cfg.OptStartTime = jetstream.DeliverByStartTimePolicy, &from
	}
	cons, err := w.js.OrderedConsumer(ctx, w.topo.OutcomesStream, cfg)
	if err != nil {
		return 0, err
	}
	n := 0
	for {
		batch, err := cons.FetchNoWait(1000)
		if err != nil {
			return n, err
		}
		got := 0
		for m := range batch.Messages() {
			got++
			if rec, err := schemas.DecodeOutcome(m.Data()); err == nil {
				w.add(rec)
			}
		}
		if err := batch.Error(); err != nil && !errors.Is(err, jetstream.ErrNoMessages) {
			return n, err
		}
		n += got
		if got == 0 {
			return n, nil
		}
	}
}

// watchReconnects catches up after every reconnect, from a little before
// the last moment the connection was known up: notices sent meanwhile were
// lost.
func (w *cancelWatch) watchReconnects(ctx context.Context, nc *nats.Conn) {
	seen, upAt := nc.Stats().Reconnects, time.Now()
	t := time.NewTicker(reconnectCheck)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			n := nc.Stats().Reconnects
			if n == seen {
				if nc.IsConnected() {
					upAt = now
				}
				continue
			}
			seen = n
			w.log.Info().Msg("reconnected: reading the cancels stored meanwhile")
			cctx, cancel := context.WithTimeout(ctx, settleTimeout)
			w.catchUp(cctx, upAt.Add(-reconnectCheck-clockSkew))
			cancel()
			upAt = now
		}
	}
}

// add remembers a cancelled request and stops its running attempts.
func (w *cancelWatch) add(rec *schemas.OutcomeEvent) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if _, ok := w.records[rec.RequestID]; ok {
		return // the first one read is the one stored
	}
	w.order = append(w.order, rec.RequestID)
	w.records[rec.RequestID] = rec
	for t := w.running[rec.RequestID]; t != nil; t = t.next {
		t.cancel(ErrCancelled)
	}
	if len(w.order) > w.max {
		w.forgetOldest()
	}
}

// forgetOldest drops the older half of the remembered cancels; messages
// published before the newest of them look their record up from now on.
func (w *cancelWatch) forgetOldest() {
	drop := w.order[:len(w.order)/2]
	for _, id := range drop {
		if rec := w.records[id]; rec != nil && rec.At.After(w.forgotten) {
			w.forgotten = rec.At
		}
		delete(w.records, id)
	}
	w.order = append([]string(nil), w.order[len(drop):]...)
	if w.forgotten.After(w.horizon) {
		w.horizon = w.forgotten
	}
}

// known returns the cancelled record of requestID when the replica knows
// it, and whether a message published then must look its record up.
func (w *cancelWatch) known(requestID string, published time.Time) (*schemas.OutcomeEvent, bool) {
	if w == nil { // a runtime built without New (stage tests)
		return nil, false
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if rec := w.records[requestID]; rec != nil {
		return rec, false
	}
	return nil, !w.horizon.IsZero() && published.Before(w.horizon.Add(clockSkew))
}

// cancelled returns the cancelled record of requestID, if remembered.
func (w *cancelWatch) cancelled(requestID string) *schemas.OutcomeEvent {
	if w == nil {
		return nil
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.records[requestID]
}

// track registers a running attempt of requestID: a cancel calls cancel
// with ErrCancelled (at once, when the request is already cancelled). The
// returned func unregisters it.
func (w *cancelWatch) track(requestID string, cancel context.CancelCauseFunc) (untrack func()) {
	if w == nil {
		return func() {}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.records[requestID] != nil {
		cancel(ErrCancelled)
	}
	t := &trackedRun{w: w, requestID: requestID, cancel: cancel, next: w.running[requestID]}
	w.running[requestID] = t
	return t.untrack
}

// untrack removes t from the running attempts of its request.
func (t *trackedRun) untrack() {
	w := t.w
	w.mu.Lock()
	defer w.mu.Unlock()
	head := w.running[t.requestID]
	if head == t {
		if t.next == nil {
			delete(w.running, t.requestID)
		} else {
			w.running[t.requestID] = t.next
		}
		return
	}
	for p := head; p != nil; p = p.next {
		if p.next == t {
			p.next = t.next
			return
		}
	}
}
