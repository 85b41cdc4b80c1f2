package api

import (
	"context"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/personaq/personaq/consumers/wire"
)

// hubBuffer is how many chunks wait for one event stream; past it the
// stream lags and follows its request on a consumer of its own.
const hubBuffer = 1024

// outputHub follows the whole output stream on one consumer per API
// process and hands each request's chunks to the event streams following
// it. A filtered consumer per event stream would make the server scan
// past every other request's chunks for each of its own (the cost grows
// with requests streaming at once × streams following); the hub's one
// consumer reads each chunk once.
type outputHub struct {
	prefix string // "<output prefix>."
	buffer int    // hubBuffer (a test makes it small)

	mu       sync.Mutex
	ready    bool // the hub's consumer exists: it delivers every chunk stored from now on
	watchers map[string]map[*outputWatch]struct{}
}

// outputWatch is one event stream's share of the hub.
type outputWatch struct {
	ch     chan sseEvent
	lagged chan struct{} // closed when the hub dropped a chunk for it
}

func newOutputHub(t wire.Topology) *outputHub {
	return &outputHub{prefix: t.Output.Prefix + ".", buffer: hubBuffer, watchers: map[string]map[*outputWatch]struct{}{}}
}

// follow consumes the output stream from now on until ctx ends, retrying
// until the stream exists; ordered consumers recreate themselves across
// reconnects from where they stood.
func (h *outputHub) follow(ctx context.Context, js jetstream.JetStream, stream string) {
	var cc jetstream.ConsumeContext
	for wait := 100 * time.Millisecond; cc == nil; wait = min(2*wait, 5*time.Second) {
		cons, err := js.OrderedConsumer(ctx, stream, jetstream.OrderedConsumerConfig{
			FilterSubjects: []string{h.prefix + ">"}, DeliverPolicy: jetstream.DeliverNewPolicy})
		if err == nil {
			cc, err = cons.Consume(h.dispatch)
		}
		if err == nil {
			break
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
	}
	h.mu.Lock()
	h.ready = true
	h.mu.Unlock()
	<-ctx.Done()
	cc.Stop()
	h.mu.Lock()
	h.ready = false
	h.mu.Unlock()
}

// dispatch hands one chunk to the streams following its request, never
// waiting on one: a stream whose buffer is full lags.
func (h *outputHub) dispatch(m jetstream.Msg) {
	md, err := m.Metadata()
	if err != nil {
		return
	}
	key, _, _ := strings.Cut(strings.TrimPrefix(m.Subject(), h.prefix), ".")
	ev := sseEvent{seq: md.Sequence.Stream, data: m.Data()}
	h.mu.Lock()
	defer h.mu.Unlock()
	for w := range h.watchers[key] {
		select {
		case w.ch <- ev:
		default:
			h.dropLocked(key, w)
		}
	}
}

// watch registers a stream following requestID; nil when the hub is not
// following the output stream (the stream then follows its request alone).
func (h *outputHub) watch(requestID string) *outputWatch {
	key := wire.RequestKey(requestID)
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.ready {
		return nil
	}
	w := &outputWatch{ch: make(chan sseEvent, h.buffer), lagged: make(chan struct{})}
	if h.watchers[key] == nil {
		h.watchers[key] = map[*outputWatch]struct{}{}
	}
	h.watchers[key][w] = struct{}{}
	return w
}

// unwatch ends w's share.
func (h *outputHub) unwatch(requestID string, w *outputWatch) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.dropLocked(wire.RequestKey(requestID), w)
}

func (h *outputHub) dropLocked(key string, w *outputWatch) {
	if _, ok := h.watchers[key][w]; !ok {
		return
	}
	delete(h.watchers[key], w)
	if len(h.watchers[key]) == 0 {
		delete(h.watchers, key)
	}
	close(w.lagged)
}

// followOutput delivers the request's output chunks after seq `after` on
// the returned channel until ctx ends: those stored before the call from
// the stream, then the hub's, each once (by sequence). Without the hub, or
// once lagging behind it, from a consumer of its own.
func (s *Server) followOutput(ctx context.Context, requestID string, after uint64) (<-chan sseEvent, error) {
	w := s.outputHub.watch(requestID)
	if w == nil {
		return s.follow(ctx, s.cfg.Topology.Output.Stream, s.cfg.Topology.OutputFilter(requestID), after)
	}
	filter := s.cfg.Topology.OutputFilter(requestID)
	upTo := s.lastSeq(ctx, s.cfg.Topology.Output.Stream, filter) // after watching: the hub has what comes later
	out := make(chan sseEvent, 64)
	go func() {
		defer s.outputHub.unwatch(requestID, w)
		last := after
		send := func(ev sseEvent) bool {
			if ev.seq <= last {
				return true
			}
			select {
			case out <- ev:
				last = ev.seq
				return true
			case <-ctx.Done():
				return false
			}
		}
		if upTo > after && !s.readOutput(ctx, filter, after, upTo, send) {
			return
		}
		for {
			select {
			case ev := <-w.ch:
				if !send(ev) {
					return
				}
			case <-w.lagged:
				s.followAlone(ctx, filter, last, send)
				return
			case <-ctx.Done():
				return
			}
		}
	}()
	return out, nil
}

// readOutput sends the chunks on filter after seq `after` up to seq upTo,
// read from the stream; false when ctx ended or the stream cannot be read
// (the event stream then has no more output). A chunk at upTo that aged
// out of the stream meanwhile is waited for no longer than drainWait.
func (s *Server) readOutput(ctx context.Context, filter string, after, upTo uint64, send func(sseEvent) bool) bool {
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	evs, err := s.follow(rctx, s.cfg.Topology.Output.Stream, filter, after)
	if err != nil {
		return false
	}
	quiet := time.NewTimer(drainWait)
	defer quiet.Stop()
	for {
		select {
		case ev := <-evs:
			if !send(ev) {
				return false
			}
			if ev.seq >= upTo {
				return true
			}
			quiet.Reset(drainWait)
		case <-quiet.C:
			return true
		case <-ctx.Done():
			return false
		}
	}
}

// followAlone sends the chunks on filter after seq `after` from a
// consumer of this stream's own, until ctx ends.
func (s *Server) followAlone(ctx context.Context, filter string, after uint64, send func(sseEvent) bool) {
	evs, err := s.follow(ctx, s.cfg.Topology.Output.Stream, filter, after)
	if err != nil {
		return
	}
	for {
		select {
		case ev := <-evs:
			if !send(ev) {
				return
			}
		case <-ctx.Done():
			return
		}
	}
}
