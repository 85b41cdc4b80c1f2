package consumers

import (
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// holdSet keeps messages whose short retry delay is served locally: they
// stay in the heartbeat set until due, then get a plain Nak, which the
// server redelivers at once (no redelivery timer involved).
type holdSet struct {
	mu     sync.Mutex
	timers map[uint64]*time.Timer
	msgs   map[uint64]jetstream.Msg
}

func (h *holdSet) hold(s *subscription, m jetstream.Msg, d time.Duration) {
	id := s.inflight.add(m)
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.timers == nil {
		h.timers, h.msgs = map[uint64]*time.Timer{}, map[uint64]jetstream.Msg{}
	}
	h.msgs[id] = m
	h.timers[id] = time.AfterFunc(d, func() { h.due(s, id) })
}

// due naks a held message when its delay is over.
func (h *holdSet) due(s *subscription, id uint64) {
	h.mu.Lock()
	m, ok := h.msgs[id]
	delete(h.msgs, id)
	delete(h.timers, id)
	h.mu.Unlock()
	if !ok {
		return
	}
	if err := m.Nak(); err != nil {
		s.log.Warn().Err(err).Msg("nak of a held retry failed; redelivery after AckWait")
	}
	s.inflight.remove(id)
}

// releaseAll naks every held message now (shutdown): a retry that comes
// early is better than one that waits for AckWait.
func (h *holdSet) releaseAll(s *subscription) {
	h.mu.Lock()
	ids := make([]uint64, 0, len(h.timers))
	for id, t := range h.timers {
		t.Stop()
		ids = append(ids, id)
	}
	h.mu.Unlock()
	for _, id := range ids {
		h.due(s, id)
	}
}
