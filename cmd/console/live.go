package console

import (
	"net/http"
	"strconv"
	"time"
)

type liveView struct {
	Events []liveEvent
	LastID uint64
}

// livePageEvents is how many past events the live page starts with.
const livePageEvents = 200

func (s *Server) livePage(w http.ResponseWriter, r *http.Request) {
	evs, last := s.feed.ring.recent(livePageEvents)
	s.render(w, r, http.StatusOK, "live", page{Title: "Live", Nav: "live", Data: liveView{Events: evs, LastID: last}})
}

// liveEvents streams the events after ?after= (or Last-Event-ID), then each
// new one as it arrives.
func (s *Server) liveEvents(w http.ResponseWriter, r *http.Request) {
	after, _ := strconv.ParseUint(r.URL.Query().Get("after"), 10, 64)
	if id, err := strconv.ParseUint(r.Header.Get("Last-Event-ID"), 10, 64); err == nil {
		after = id
	}
	sse, ok := newSSE(w)
	if !ok {
		http.Error(w, "streaming unsupported", http.StatusInternalServerError)
		return
	}
	backlog, ch := s.feed.ring.subscribe(after)
	defer s.feed.ring.unsubscribe(ch)
	for _, e := range backlog {
		if sse.send(e.Kind, e.ID, e) != nil {
			return
		}
	}
	tick := time.NewTicker(pingEvery)
	defer tick.Stop()
	for {
		var err error
		select {
		case <-r.Context().Done():
			return
		case e := <-ch:
			err = sse.send(e.Kind, e.ID, e)
		case <-tick.C:
			err = sse.ping()
		}
		if err != nil {
			return
		}
	}
}
