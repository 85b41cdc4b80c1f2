package transport

import (
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// holdSet keeps messages whose short retry delay is served locally: they
// stay in the heartbeat set until due, then get a plain Nak, which the
// server redelivers at once (no redelivery timer involved).
type holdSet struct {
	mu   sync.Mutex
	held map[uint64]*heldMsg
}

type heldMsg struct {
	m     jetstream.Msg
	claim *claim
	due   time.Time
	timer *time.Timer
}

func (h *holdSet) hold(s *subscription, m jetstream.Msg, c *claim, d time.Duration) {
	id := s.inflight.add(m, c)
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.held == nil {
		h.held = map[uint64]*heldMsg{}
	}
	hm := &heldMsg{m: m, claim: c, due: time.Now().Add(d)}
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
	var err error
	if wait > 0 {
		err = s.confirm(hm.m, hm.claim, nakBody(wait))
	} else {
		err = s.confirm(hm.m, hm.claim, nakBody(0))
	}
	if err != nil {
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
