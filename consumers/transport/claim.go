package transport

import (
	"context"
	"slices"
	"sync"
	"time"
)

// claim is this replica's hold on one delivered message, as the server
// sees it: the message stays ours while our heartbeats (InProgress) keep
// resetting its AckWait clock. Once that clock may have run out the server
// may have handed the message to another replica, and since ack, nak and
// term are matched by stream sequence alone (a broker fact the tests pin),
// any settle from us could end *that* delivery: a lapsed claim settles nothing.
type claim struct {
	ackWait time.Duration
	cancel  context.CancelCauseFunc

	mu       sync.Mutex
	beat     time.Time // when the server last heard of us: receipt or an InProgress sent
	lost     bool
	reported bool
	// settling: a settle of the message is going out; no heartbeat may
	// follow it (see beatIfDue).
	settling bool
	// onLost are called when the claim is lost (see Delivery.HoldContext).
	onLost []*lostHook
}

// lostHook is one function whenLost registered.
type lostHook struct{ f func() }

func newClaim(ackWait time.Duration, received time.Time, cancel context.CancelCauseFunc) *claim {
	return &claim{ackWait: ackWait, beat: received, cancel: cancel}
}

// FenceMargin is how much of a claim (or of any lease fenced the same
// way) must be left for a settle to go out: the send itself, scheduling
// and clock granularity fit in it.
func FenceMargin(ttl time.Duration) time.Duration { return ttl / 5 }

// held reports whether the claim is live at now: not lost, and the last
// heartbeat recent enough that the server has not redelivered.
func (c *claim) held(now time.Time) bool {
	if c == nil {
		return true
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.heldLocked(now)
}

func (c *claim) heldLocked(now time.Time) bool {
	if c.lost || c.ackWait <= 0 {
		return !c.lost
	}
	return now.Sub(c.beat) < c.ackWait-FenceMargin(c.ackWait)
}

// beatIfDue sends a heartbeat (send) when one is due at now and records
// it; it reports whether it sent one. None is due once the claim lapsed
// (then it is lost: a missed heartbeat cannot be made up, the server may
// have redelivered already) or a settle is going out. The send is made
// under the claim's lock, which settling takes too: the server matches an
// InProgress by stream sequence alone, so one sent after our nak could
// reset the timer of the message's next delivery, and hold back a retry
// by up to AckWait.
func (c *claim) beatIfDue(now time.Time, send func() error) (bool, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.lost || c.settling {
		return false, nil
	}
	if !c.heldLocked(now) {
		c.loseLocked(ErrLeaseLost)
		return false, nil
	}
	if err := send(); err != nil {
		return false, err
	}
	if now.After(c.beat) {
		c.beat = now
	}
	return true, nil
}

// settle marks the claim settling: no heartbeat is sent after this returns.
func (c *claim) settle() {
	if c == nil {
		return
	}
	c.mu.Lock()
	c.settling = true
	c.mu.Unlock()
}

// lose fences the claim and cancels the message's work with cause.
func (c *claim) lose(cause error) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.loseLocked(cause)
}

func (c *claim) loseLocked(cause error) {
	if c.lost {
		return
	}
	c.lost = true
	if c.cancel != nil {
		c.cancel(cause)
	}
	for _, h := range c.onLost {
		h.f()
	}
	c.onLost = nil
}

// whenLost calls f once the claim is lost (at once if it is); the
// returned function stops that and calls f itself.
func (c *claim) whenLost(f func()) (release func()) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.lost {
		f()
		return f
	}
	h := &lostHook{f: f}
	c.onLost = append(c.onLost, h)
	return func() {
		c.mu.Lock()
		c.onLost = slices.DeleteFunc(c.onLost, func(g *lostHook) bool { return g == h })
		c.mu.Unlock()
		f()
	}
}

// isLost reports whether the claim was fenced.
func (c *claim) isLost() bool {
	if c == nil {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lost
}

// reportLapse returns true the first time it is called on a lost claim.
func (c *claim) reportLapse() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.lost || c.reported {
		return false
	}
	c.reported = true
	return true
}
