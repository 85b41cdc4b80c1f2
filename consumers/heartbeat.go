package consumers

import (
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// inflightSet holds the messages a subscription is working on, so one
// ticker can heartbeat them all (instead of a timer per message).
type inflightSet struct {
	mu   sync.Mutex
	next uint64
	msgs map[uint64]jetstream.Msg
}

func newInflightSet() *inflightSet { return &inflightSet{msgs: map[uint64]jetstream.Msg{}} }

func (s *inflightSet) add(m jetstream.Msg) uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.next++
	s.msgs[s.next] = m
	return s.next
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

func (s *inflightSet) snapshot() []jetstream.Msg {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]jetstream.Msg, 0, len(s.msgs))
	for _, m := range s.msgs {
		out = append(out, m)
	}
	return out
}

// heartbeatLoop sends InProgress for every in-flight message each interval,
// resetting the server's AckWait clock so a long attempt is never handed
// to another replica while this one is alive (DESIGN.md invariant 3).
func (s *subscription) heartbeatLoop() {
	defer close(s.beatDone)
	t := time.NewTicker(s.heartbeatInterval())
	defer t.Stop()
	for {
		select {
		case <-t.C:
			for _, m := range s.inflight.snapshot() {
				if err := m.InProgress(); err != nil {
					s.log.Warn().Err(err).Msg("heartbeat failed")
				}
			}
		case <-s.hardStop:
			return
		}
	}
}

func (s *subscription) heartbeatInterval() time.Duration {
	if s.cfg.Heartbeat > 0 {
		return s.cfg.Heartbeat
	}
	if info := s.cons.CachedInfo(); info != nil && info.Config.AckWait > 0 {
		return max(info.Config.AckWait/3, 10*time.Millisecond)
	}
	return 10 * time.Second
}
