package consumers

import (
	"sync"
	"time"

	"github.com/personaq/personaq/consumers/transport"
)

// ownRetries remembers the deliveries this replica gave back for a retry
// it serves itself (a delay up to holdUnder: held, then a plain Nak), so
// the next delivery of such a message, when it comes back here, skips the
// lookups a redelivery otherwise pays before its attempt (its terminal
// record, its quarantine record: endedEarlier).
//
// Why that is safe: the delivery that retried wrote neither record, and
// the delivery that follows it is the next one of the message, so no
// attempt ran in between that could have. The one way a delivery count
// repeats is the consumer's state going back: a nats-server restarted on
// its store (it flushes consumer state after the acks), or a clustered
// consumer's new leader. With a ledger, begin still asks it: a step
// another delivery completed meanwhile is done there, one it ended is
// ended by its last recorded attempt, and a ledger found fresh (wiped)
// sends the delivery back to the lookups. Without one, retries are
// remembered only where the state cannot go back unseen (retriesSafe): a
// standalone nats-server holding the requests stream, the one this
// replica is connected to, so a restart ends the connection; and a retry
// is taken only by a successor that came on the same connection
// (transport.Delivery.Connection). A cancel is the
// cancel stage's, before begin.
//
// A remembered delivery whose successor went to another replica is never
// taken here: it is dropped once its due time is well past.
type ownRetries struct {
	mu        sync.Mutex
	m         map[ownRetryKey]ownRetry
	nextSweep time.Time
}

type ownRetryKey struct {
	stream string
	seq    uint64
}

type ownRetry struct {
	delivered uint64    // the delivery that retried
	expires   time.Time // when its successor no longer counts as prompt
	// connection is the retried delivery's (transport.Delivery.Connection):
	// a successor that came on another connection is not taken (the server
	// may have restarted on an older consumer state in between).
	connection uint64
}

const (
	// ownRetryGrace is how long after its due time a retried delivery's
	// successor is still taken as the next delivery here.
	ownRetryGrace = time.Minute
	// ownRetriesMax bounds what is remembered; past it, redeliveries pay
	// their lookups as before.
	ownRetriesMax = 1 << 16
)

// note remembers that d was given back for a retry due after wait.
func (o *ownRetries) note(d *transport.Delivery, wait time.Duration, now time.Time) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.m == nil {
		o.m = map[ownRetryKey]ownRetry{}
	}
	if now.After(o.nextSweep) {
		o.sweep(now)
	}
	if len(o.m) >= ownRetriesMax {
		return
	}
	o.m[ownRetryKey{d.Stream, d.Sequence}] = ownRetry{delivered: d.Delivered, expires: now.Add(wait + ownRetryGrace), connection: d.Connection}
}

// take reports whether d is the delivery that follows one this replica
// retried, come on the same known connection, and forgets that retry
// either way.
func (o *ownRetries) take(d *transport.Delivery, now time.Time) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	k := ownRetryKey{d.Stream, d.Sequence}
	e, ok := o.m[k]
	if !ok {
		return false
	}
	delete(o.m, k)
	return e.delivered+1 == d.Delivered && now.Before(e.expires) &&
		d.Connection != 0 && e.connection == d.Connection
}

// sweep drops what expired; it runs at most once per grace period.
func (o *ownRetries) sweep(now time.Time) {
	for k, e := range o.m {
		if !now.Before(e.expires) {
			delete(o.m, k)
		}
	}
	o.nextSweep = now.Add(ownRetryGrace)
}
