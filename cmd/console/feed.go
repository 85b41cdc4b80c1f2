package console

import (
	"context"
	"errors"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/personaq/personaq/consumers/loop"
	"github.com/personaq/personaq/consumers/wire"
	"github.com/personaq/personaq/schemas"
)

// feed follows the outcomes and attempts streams from Window ago with
// ordered consumers: it counts outcomes and retries per persona and minute
// (the overview's charts) and keeps the newest events (the live page).
type feed struct {
	js     jetstream.JetStream
	topo   wire.Topology
	window time.Duration
	now    func() time.Time
	log    zerolog.Logger
	ring   *ring
	counts *counts
	loops  loop.Group
}

// ringSize is how many events the live page can show without a reload.
const ringSize = 500

func newFeed(js jetstream.JetStream, t wire.Topology, window time.Duration, now func() time.Time, log zerolog.Logger) *feed {
	return &feed{js: js, topo: t, window: window, now: now, log: log, ring: newRing(ringSize), counts: newCounts(window, now)}
}

func (f *feed) start(ctx context.Context) {
	f.loops.Start(ctx,
		func(ctx context.Context) {
			f.follow(ctx, f.topo.OutcomesStream, f.topo.OutcomesPrefix+".>", f.onOutcome)
		},
		func(ctx context.Context) {
			f.follow(ctx, f.topo.AttemptsStream, f.topo.AttemptsPrefix+".>", f.onAttempt)
		})
}

func (f *feed) stop() { f.loops.Stop() }

// follow consumes stream from Window ago; a stream that does not exist yet
// (no replica has provisioned it) is waited for.
func (f *feed) follow(ctx context.Context, stream, filter string, fn func(jetstream.Msg)) {
	for wait := 100 * time.Millisecond; ; wait = min(2*wait, 5*time.Second) {
		since := f.now().Add(-f.window)
		cons, err := f.js.OrderedConsumer(ctx, stream, jetstream.OrderedConsumerConfig{
			FilterSubjects: []string{filter}, DeliverPolicy: jetstream.DeliverByStartTimePolicy, OptStartTime: &since,
		})
		if err == nil {
			cc, cerr := cons.Consume(fn)
			if cerr == nil {
				<-ctx.Done()
				cc.Stop()
				return
			}
			err = cerr
		}
		if !errors.Is(err, jetstream.ErrStreamNotFound) {
			f.log.Debug().Err(err).Str("stream", stream).Msg("console: cannot follow stream yet")
		}
		if !loop.Sleep(ctx, wait) {
			return
		}
	}
}

func (f *feed) onOutcome(m jetstream.Msg) {
	ev, err := schemas.DecodeOutcome(m.Data())
	if err != nil {
		return
	}
	e := outcomeEvent(ev)
	f.counts.add(e)
	f.ring.add(e)
}

func (f *feed) onAttempt(m jetstream.Msg) {
	ev, err := schemas.DecodeAttemptEvent(m.Data())
	if err != nil {
		return
	}
	e := attemptEvent(ev)
	f.counts.add(e)
	f.ring.add(e)
}
