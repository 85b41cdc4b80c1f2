package transport

import (
	"sync"
	"time"
)

// holdSet keeps messages whose short retry delay is served locally: they
// stay in the heartbeat set until due, then get a plain Nak, which the
// server redelivers at once (no redelivery timer involved).
type holdSet struct {
	mu   sync.Mutex
	held map[uint64]*heldMsg
}

type heldMsg struct {
	ref   msgRef
	claim *claim
	due   time.Time
	timer *time.Timer
}

func (h *holdSet) hold(s *subscription, ref msgRef, c *claim, d time.Duration) {
	id := s.inflight.add(ref, c)
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.held == nil {
		h.held = map[uint64]*heldMsg{}
	}
	hm := &heldMsg{ref: ref, claim: c, due: time.Now().Add(d)}
	h.held[id] = hm
	hm.timer = time.AfterFunc(d, func() { h.due(s, id, 0) })
}

// due naks a held message when its delay is over (wait 0), or with the
// delay it still had to wait (shutdown). A message whose claim lapsed
// meanwhile (the replica was frozen) is left to the server.
func (h *holdSet) due(s *subscription, id uint64, wait time.Duration) {
	h.mu.Lock()
	hm, ok := h.held[id]
	delete(h.held, id)
	h.mu.Unlock()
	if !ok {
		return
	}
	defer s.inflight.remove(id)
	if !hm.claim.held(time.Now()) {
		hm.claim.lose(ErrLeaseLost)
		s.log.Warn().Str("op", "nak").Msg("stale settle refused: the claim on a held retry lapsed")
		if s.cfg.StaleSettle != nil {
			s.cfg.StaleSettle(s.topic, "nak")
		}
		return
	}
	hm.claim.settle()
	if err := s.confirm(hm.ref, hm.claim, nakBody(wait)); err != nil {
		s.log.Warn().Err(err).Msg("nak of a held retry failed; redelivery after AckWait")
	}
}

// releaseAll gives back every held message (shutdown), each with the delay
// it was still holding for, so a retry keeps its Retry-After.
func (h *holdSet) releaseAll(s *subscription) {
	h.mu.Lock()
	now := time.Now()
	waits := make(map[uint64]time.Duration, len(h.held))
	for id, hm := range h.held {
		hm.timer.Stop()
		waits[id] = max(hm.due.Sub(now), 0)
	}
	h.mu.Unlock()
	for id, w := range waits {
		h.due(s, id, w)
	}
}
