package transport

import (
	"context"
	"sync"
	"time"

	"github.com/personaq/personaq/consumers/loop"
)

// inflightSet holds the messages a subscription is working on (or holding
// for a short retry delay), so one ticker can heartbeat them all (instead
// of a timer per message).
type inflightSet struct {
	mu   sync.Mutex
	next uint64
	msgs map[uint64]inflightMsg
}

type inflightMsg struct {
	ref   msgRef
	claim *claim
	// d is the delivery handed to the consumer; nil for a held retry.
	d *Delivery
}

func newInflightSet() *inflightSet { return &inflightSet{msgs: map[uint64]inflightMsg{}} }

func (s *inflightSet) add(ref msgRef, c *claim) uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.next++
	s.msgs[s.next] = inflightMsg{ref: ref, claim: c}
	return s.next
}

// attach records the delivery of message id, released at Close if its
// consumer never settles it.
func (s *inflightSet) attach(id uint64, d *Delivery) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if e, ok := s.msgs[id]; ok {
		e.d = d
		s.msgs[id] = e
	}
}

func (s *inflightSet) remove(id uint64) {
	s.mu.Lock()
	delete(s.msgs, id)
	s.mu.Unlock()
}

func (s *inflightSet) len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.msgs)
}

func (s *inflightSet) snapshot() []inflightMsg {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]inflightMsg, 0, len(s.msgs))
	for _, m := range s.msgs {
		out = append(out, m)
	}
	return out
}

// heartbeatLoop sends InProgress for every in-flight message each interval,
// resetting the server's AckWait clock so a long attempt is never handed
// to another replica while this one is alive. A
// message whose heartbeat is overdue (the process was frozen, the clock
// ran out while sends failed) is not beaten again: its claim is lost, its
// work cancelled, and it settles nothing.
// It runs on the subscription's beats Group until Close's hard stop.
func (s *subscription) heartbeatLoop(ctx context.Context) {
	loop.Every(ctx, s.heartbeatInterval(), s.beatAll)
}

func (s *subscription) beatAll() {
	if s.cfg.Frozen != nil && s.cfg.Frozen.Load() {
		return
	}
	for _, e := range s.inflight.snapshot() {
		sent, err := e.claim.beatIfDue(time.Now(), func() error { return s.send(e.ref, bodyProgress) })
		switch {
		case err != nil:
			s.log.Warn().Err(err).Msg("heartbeat failed")
		case !sent && e.claim.isLost():
			s.lapsed(e)
		}
	}
}

// lapsed reports a claim lost to an overdue heartbeat, once.
func (s *subscription) lapsed(e inflightMsg) {
	if !e.claim.reportLapse() {
		return
	}
	ev := s.log.Warn().Dur("ack_wait", e.claim.ackWait)
	if e.d != nil {
		ev = ev.Uint64("stream_seq", e.d.Sequence).Uint64("delivered", e.d.Delivered)
	}
	ev.Msg("lease lost: heartbeat overdue; attempt cancelled and its message left to the server")
}

func (s *subscription) heartbeatInterval() time.Duration {
	if s.cfg.Heartbeat > 0 {
		return s.cfg.Heartbeat
	}
	if aw := s.ackWait(); aw > 0 {
		return max(aw/3, 10*time.Millisecond)
	}
	return 10 * time.Second
}

// ackWait is the consumer's AckWait (zero when unknown).
func (s *subscription) ackWait() time.Duration {
	if info := s.cons.CachedInfo(); info != nil {
		return info.Config.AckWait
	}
	return 0
}
