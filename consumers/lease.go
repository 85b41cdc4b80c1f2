package consumers

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/personaq/personaq/consumers/ledger"
	"github.com/personaq/personaq/consumers/loop"
	"github.com/personaq/personaq/consumers/transport"
)

// attemptLease is a running attempt's lease in the ledger, kept alive by
// the leaseKeeper. Its deadline is local and conservative: the time a
// renewal was *sent* plus the TTL, never later than Redis's own expiry.
type attemptLease struct {
	l   ledger.Lease
	ttl time.Duration
	// log is the attempt's delivery logger, attempt its number: a lease
	// logs only when it is lost, so no logger context is made for it.
	log     *stateLog
	attempt int
	cancel  context.CancelCauseFunc // set once the attempt's context exists

	mu       sync.Mutex
	deadline time.Time
	lost     bool
	// ending: the attempt is being finished; from here its Finish (fenced
	// by the token in the ledger) decides, and a renewal refused because
	// that Finish already released the lease is not a loss.
	ending bool
}

// end marks the attempt as finishing: the keeper stops judging its lease.
func (a *attemptLease) end() {
	if a == nil {
		return
	}
	a.mu.Lock()
	a.ending = true
	a.mu.Unlock()
}

func (a *attemptLease) isEnding() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.ending
}

func newAttemptLease(l ledger.Lease, ttl time.Duration, sent time.Time, log *stateLog, attempt int) *attemptLease {
	return &attemptLease{l: l, ttl: ttl, log: log, attempt: attempt, deadline: sent.Add(ttl)}
}

// valid reports whether a settle may still go out at now under this lease.
func (a *attemptLease) valid(now time.Time) bool {
	if a == nil {
		return true
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	return !a.lost && now.Add(transport.FenceMargin(a.ttl)).Before(a.deadline)
}

func (a *attemptLease) renewed(sent time.Time) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if !a.lost {
		a.deadline = sent.Add(a.ttl)
	}
}

// until is the lease's local deadline: past it, unless renewed, another
// replica may run the request.
func (a *attemptLease) until() time.Time {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.deadline
}

// overdue reports whether the lease ran out at now without a renewal.
func (a *attemptLease) overdue(now time.Time) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return !now.Before(a.deadline)
}

// lose marks the lease lost and cancels the attempt; true the first time.
func (a *attemptLease) lose() bool {
	if a == nil {
		return false
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.lost {
		return false
	}
	a.lost = true
	if a.cancel != nil {
		a.cancel(transport.ErrLeaseLost)
	}
	return true
}

func (a *attemptLease) isLost() bool {
	if a == nil {
		return false
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.lost
}

// leaseKeeper renews the leases of running attempts: every tick, one
// pipelined round trip per lease TTL in use (one script call per lease).
// A lease refused by the ledger, or not renewed before it ran out (Redis
// unreachable, the process frozen), is lost: its attempt is cancelled.
type leaseKeeper struct {
	ledger Ledger
	frozen *atomic.Bool
	onLost func(a *attemptLease, why string)

	mu     sync.Mutex
	leases map[*attemptLease]struct{}
}

func newLeaseKeeper(l Ledger, frozen *atomic.Bool, onLost func(*attemptLease, string)) *leaseKeeper {
	return &leaseKeeper{ledger: l, frozen: frozen, onLost: onLost, leases: map[*attemptLease]struct{}{}}
}

func (k *leaseKeeper) add(a *attemptLease) {
	if k == nil || a == nil {
		return
	}
	k.mu.Lock()
	k.leases[a] = struct{}{}
	k.mu.Unlock()
}

func (k *leaseKeeper) remove(a *attemptLease) {
	if k == nil || a == nil {
		return
	}
	k.mu.Lock()
	delete(k.leases, a)
	k.mu.Unlock()
}

// byTTL groups the live leases by TTL; leases that ran out are lost.
func (k *leaseKeeper) byTTL(now time.Time) map[time.Duration][]*attemptLease {
	k.mu.Lock()
	defer k.mu.Unlock()
	out := map[time.Duration][]*attemptLease{}
	for a := range k.leases {
		if a.isLost() || a.isEnding() {
			delete(k.leases, a)
			continue
		}
		if a.overdue(now) {
			delete(k.leases, a)
			if a.lose() {
				k.onLost(a, "renewal overdue")
			}
			continue
		}
		out[a.ttl] = append(out[a.ttl], a)
	}
	return out
}

// run renews every interval until ctx ends.
func (k *leaseKeeper) run(ctx context.Context, interval time.Duration) {
	loop.Every(ctx, interval, func() { k.renewAll(ctx) })
}

func (k *leaseKeeper) renewAll(ctx context.Context) {
	if k.frozen.Load() {
		return
	}
	for ttl, group := range k.byTTL(time.Now()) {
		k.renew(ctx, ttl, group)
	}
}

func (k *leaseKeeper) renew(ctx context.Context, ttl time.Duration, group []*attemptLease) {
	leases := make([]ledger.Lease, len(group))
	for i, a := range group {
		leases[i] = a.l
	}
	sent := time.Now()
	rctx, cancel := context.WithTimeout(ctx, min(ttl/3, ledgerTimeout))
	defer cancel()
	for i, err := range k.ledger.Renew(rctx, leases, ttl) {
		switch {
		case err == nil:
			group[i].renewed(sent)
		case errors.Is(err, ledger.ErrLeaseLost):
			k.remove(group[i])
			if group[i].isEnding() {
				continue // its Finish released the lease while this renewal was on the way
			}
			if group[i].lose() {
				k.onLost(group[i], "ledger refused the renewal")
			}
		}
		// Otherwise Redis did not answer: the lease runs out unless a
		// later renewal gets through.
	}
}

// leaseTTL is the lease of an attempt on a consumer with ackWait: shorter
// than AckWait, so the lease of a holder that died has run out when the
// server redelivers its message (AckWait after its last heartbeat), and the
// redelivery runs instead of finding a live lease and burning a delivery.
// A live holder renews it every third of its length.
func leaseTTL(ackWait time.Duration) time.Duration { return ackWait * 4 / 5 }

// leaseInterval is how often leases of ttl are renewed.
func leaseInterval(ttl time.Duration) time.Duration { return max(ttl/3, 10*time.Millisecond) }
