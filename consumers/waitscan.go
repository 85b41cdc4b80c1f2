package consumers

import (
	"context"
	"errors"
	"maps"
	"slices"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/personaq/personaq/consumers/loop"
)

// A request can wait where no delivery sees it: its persona's consumer is
// paused (an open circuit, `persona pause`), its worker slots are busy (a
// subscription pulls no more than it has free slots), or the pull is
// stopped (the attempt ledger is down). The waiting-request scan reads
// such requests where they wait, by stream sequence: a read is not a
// delivery and counts nothing toward MaxDeliver. Two rules use it: the
// ledger-outage rule (ledgeroutage.go: tell the caller it waits, end it at
// its step deadline) and the queue-wait rule (queuewaitscan.go: end it
// once its queue wait has passed). Both write create-once records, so N
// replicas scanning produce one; the message, delivered later, is settled
// by that record, unrun.

// waitScanEvery is how often the scan's rules run; waitScanMax bounds the
// requests one rule reads for one persona in one pass.
const (
	waitScanEvery = time.Second
	waitScanMax   = 1000
)

// scanWaitingRequests runs each rule every waitScanEvery, persona by
// persona, until ctx ends.
func (r *Runtime) scanWaitingRequests(ctx context.Context) {
	outage := newOutageRule(r)
	queueWait := newQueueWaitRule(r)
	loop.Every(ctx, waitScanEvery, func() {
		names := slices.Sorted(maps.Keys(r.personas))
		if outage.active() {
			for _, name := range names {
				outage.pass(ctx, name)
			}
		}
		for _, name := range names {
			queueWait.pass(ctx, name)
		}
	})
}

// readWaiting reads persona's requests from stream sequence from on,
// oldest first, at most waitScanMax, handing each to visit.
func (r *Runtime) readWaiting(ctx context.Context, s jetstream.Stream, persona string, from uint64, visit func(*jetstream.RawStreamMsg)) {
	seq := from
	for range waitScanMax {
		raw, err := s.GetMsg(ctx, seq, jetstream.WithGetMsgSubject(r.topo.RequestSubject(persona)))
		if err != nil {
			if !errors.Is(err, jetstream.ErrMsgNotFound) {
				r.log.Debug().Err(err).Str("persona", persona).Msg("waiting requests not read")
			}
			return
		}
		seq = raw.Sequence + 1
		visit(raw)
	}
}
