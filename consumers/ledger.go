package consumers

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"github.com/personaq/personaq/consumers/ledger"
	"github.com/personaq/personaq/consumers/loop"
	"github.com/personaq/personaq/consumers/rdb"
	"github.com/personaq/personaq/consumers/transport"
	"github.com/personaq/personaq/retry"
	"github.com/personaq/personaq/schemas"
)

// Ledger counts a task step's attempts across replicas. *ledger.Ledger
// (Redis) implements it; with none, attempts are counted by JetStream
// deliveries and no history is kept (no plateau detection, no feedback).
//
// The runtime begins every attempt with a lease (ledger.WithLease, the
// persona's AckWait), renews the leases of running attempts with Renew and
// fences every Finish with the lease: an attempt that lost its lease
// settles nothing.
//
// When Redis is down: every method returns an error wrapping
// ledger.ErrUnavailable (bounded by the client's timeouts: build it with
// ledger.NewClient). The runtime then stops pulling and holds the
// deliveries it has, counting nothing (see ledgerwait.go), Ready reports
// ledger.ErrUnavailable, and a ping every few seconds notices the recovery. ledger.ErrLeaseLost from Finish
// or Renew means a stale holder: nothing is settled. Any other error is a
// bug or corrupt data (ledger.ErrCorrupt) and is logged.
type Ledger interface {
	Begin(ctx context.Context, key ledger.StepKey, requestID string, opts ...ledger.BeginOption) (ledger.Begun, error)
	Finish(ctx context.Context, key ledger.StepKey, a retry.Attempt, opts ledger.FinishOptions) error
	Renew(ctx context.Context, leases []ledger.Lease, ttl time.Duration) []error
	Epoch(ctx context.Context) (time.Time, error)
	History(ctx context.Context, key ledger.StepKey) ([]retry.Attempt, ledger.State, error)
	Ping(ctx context.Context) error
}

// stepKey scopes the ledger entry to one request of a task step, so a
// replayed request (new request id) starts with a fresh attempt count.
func stepKey(req *schemas.PersonaRequest) ledger.StepKey {
	return ledger.StepKey{TaskID: req.TaskID, Step: req.Step + "@" + req.RequestID}
}

func ledgerOptions(counted, succeeded bool, st *attemptState) ledger.FinishOptions {
	o := ledger.FinishOptions{Counted: counted, Succeeded: succeeded, RequestID: st.req.RequestID}
	if st.lease != nil {
		o.Lease = st.lease.l
	}
	return o
}

// watchLedger pings the ledger so readiness recovers (and degrades) even
// when no message arrives to notice.
func (r *Runtime) watchLedger(ctx context.Context, interval time.Duration) {
	loop.Every(ctx, interval, func() {
		pctx, cancel := context.WithTimeout(ctx, interval)
		defer cancel()
		r.health.ledgerResult(r.refreshEpoch(pctx))
	})
}

// refreshEpoch reads when the ledger's data set began (a ping that also
// notices a Redis that lost everything): a message published before it may
// have attempts the ledger forgot, so its delivery count is their floor.
func (r *Runtime) refreshEpoch(ctx context.Context) error {
	e, err := r.ledger.Epoch(ctx)
	if err != nil {
		return err
	}
	r.noteEpoch(e)
	return nil
}

// noteEpoch records the ledger's epoch, read by refreshEpoch or by a
// redelivery's Begin; a new one means the ledger lost its data.
func (r *Runtime) noteEpoch(e time.Time) {
	if old := r.epoch.Swap(e.UnixMilli()); old != 0 && old != e.UnixMilli() {
		r.log.Warn().Time("epoch", e).Time("previous_epoch", time.UnixMilli(old)).
			Msg("the ledger lost its data (new epoch): attempt counts of older requests fall back to JetStream delivery counts")
	}
}

// wipedSince reports whether the ledger's data set is younger than d's
// message: the ledger may have forgotten attempts of it.
func (r *Runtime) wipedSince(d *transport.Delivery) bool {
	e := r.epoch.Load()
	return e != 0 && d.Published.UnixMilli() < e
}

// health tracks what readiness depends on.
type health struct {
	ledgerDown atomic.Bool
	bound      atomic.Bool
}

// ledgerResult records whether the last ledger call reached Redis. Our own
// per-call deadline running out counts as unreachable (a stopped server
// can outlast it); a cancellation (shutdown) says nothing either way.
func (h *health) ledgerResult(err error) {
	if errors.Is(err, context.Canceled) {
		return
	}
	h.ledgerDown.Store(rdb.Unavailable(err))
}
