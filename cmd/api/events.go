package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// drainWait bounds how long an event stream that saw the terminal record
// waits for the attempt events stored before it.
const drainWait = 2 * time.Second

// sseEvent is one attempt event as read from the attempts stream.
type sseEvent struct {
	seq  uint64
	data []byte
}

// events is GET /v1/requests/{id}/events: attempt events as they happen
// (id = attempts-stream sequence), then one terminal event, then the end.
// Last-Event-ID resumes after the event it names.
func (s *Server) events(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	after, replayTerminal, prob := lastEventID(r.Header.Get("Last-Event-ID"))
	if prob != nil {
		writeProblem(w, prob)
		return
	}
	wt := s.waiters.add(id) // before the lookup: nothing is missed
	defer s.waiters.remove(wt)
	st, err := s.statusOf(r.Context(), id)
	switch {
	case errors.Is(err, errNotFound):
		writeProblem(w, newProblem(http.StatusNotFound, probNotFound, "no request "+id+" is known").field("id"))
		return
	case err != nil:
		s.fail(w, r, err)
		return
	}
	flusher, _ := w.(http.Flusher)
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	if replayTerminal && st.Terminal() {
		writeTerminal(w, st)
		flush(flusher)
		return
	}
	if replayTerminal {
		after = 0
	}
	s.streamEvents(r.Context(), w, flusher, wt, st, after)
}

// streamEvents follows the request's attempt events after seq `after`
// until its terminal record, then writes the terminal event.
func (s *Server) streamEvents(ctx context.Context, w http.ResponseWriter, f http.Flusher, wt *waiter, st *RequestStatus, after uint64) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	evs, err := s.followAttempts(ctx, st.RequestID, after)
	if err != nil {
		fmt.Fprintf(w, ": attempt events unavailable: %s\n\n", oneLine(err.Error()))
		flush(f)
	}
	ka := time.NewTicker(s.cfg.KeepAlive)
	defer ka.Stop()
	last := after
	if st.Terminal() {
		s.finish(ctx, w, f, evs, st, last)
		return
	}
	for {
		select {
		case ev := <-evs:
			last = writeAttempt(w, ev)
			flush(f)
		case rec := <-wt.wake:
			if rec != nil {
				st.applyRecord(rec)
			} else if now, err := s.statusOf(ctx, st.RequestID); err == nil {
				st = now
			}
			if st.Terminal() {
				s.finish(ctx, w, f, evs, st, last)
				return
			}
		case <-ka.C:
			_, _ = w.Write([]byte(": keep-alive\n\n"))
			flush(f)
		case <-ctx.Done():
			return
		}
	}
}

// finish writes the attempt events stored before the terminal record that
// were not written yet, then the terminal event.
func (s *Server) finish(ctx context.Context, w http.ResponseWriter, f http.Flusher, evs <-chan sseEvent, st *RequestStatus, last uint64) {
	upTo := s.lastAttemptSeq(ctx, st.RequestID)
	timeout := time.NewTimer(drainWait)
	defer timeout.Stop()
	for evs != nil && last < upTo {
		select {
		case ev := <-evs:
			last = writeAttempt(w, ev)
		case <-timeout.C:
			upTo = 0
		case <-ctx.Done():
			return
		}
	}
	writeTerminal(w, st)
	flush(f)
}

// lastAttemptSeq is the stream sequence of the request's latest attempt
// event (0 when none).
func (s *Server) lastAttemptSeq(ctx context.Context, requestID string) uint64 {
	st, err := s.js.Stream(ctx, s.cfg.Topology.AttemptsStream)
	if err != nil {
		return 0
	}
	raw, err := st.GetLastMsgForSubject(ctx, s.cfg.Topology.AttemptFilter(requestID))
	if err != nil {
		return 0
	}
	return raw.Sequence
}

// followAttempts delivers the request's attempt events after seq `after`
// on the returned channel until ctx ends.
func (s *Server) followAttempts(ctx context.Context, requestID string, after uint64) (<-chan sseEvent, error) {
	cfg := jetstream.OrderedConsumerConfig{FilterSubjects: []string{s.cfg.Topology.AttemptFilter(requestID)},
		DeliverPolicy: jetstream.DeliverAllPolicy}
	if after > 0 {
		cfg.DeliverPolicy, cfg.OptStartSeq = jetstream.DeliverByStartSequencePolicy, after+1
	}
	cons, err := s.js.OrderedConsumer(ctx, s.cfg.Topology.AttemptsStream, cfg)
	if err != nil {
		return nil, fmt.Errorf("follow attempt events of %s: %w", requestID, err)
	}
	out := make(chan sseEvent, 64)
	cc, err := cons.Consume(func(m jetstream.Msg) {
		md, err := m.Metadata()
		if err != nil {
			return
		}
		select {
		case out <- sseEvent{seq: md.Sequence.Stream, data: m.Data()}:
		case <-ctx.Done():
		}
	})
	if err != nil {
		return nil, fmt.Errorf("follow attempt events of %s: %w", requestID, err)
	}
	go func() { <-ctx.Done(); cc.Stop() }()
	return out, nil
}

func writeAttempt(w http.ResponseWriter, ev sseEvent) uint64 {
	if bytes.ContainsAny(ev.data, "\r\n") { // one data line per event
		var buf bytes.Buffer
		if json.Compact(&buf, ev.data) == nil {
			ev.data = buf.Bytes()
		}
	}
	fmt.Fprintf(w, "event: attempt\nid: %d\ndata: %s\n\n", ev.seq, ev.data)
	return ev.seq
}

func writeTerminal(w http.ResponseWriter, st *RequestStatus) {
	data, _ := json.Marshal(st)
	fmt.Fprintf(w, "event: terminal\nid: terminal\ndata: %s\n\n", data)
}

func flush(f http.Flusher) {
	if f != nil {
		f.Flush()
	}
}

// lastEventID parses Last-Event-ID: a sequence, "terminal" or nothing.
func lastEventID(v string) (uint64, bool, *problem) {
	switch v {
	case "":
		return 0, false, nil
	case "terminal":
		return 0, true, nil
	}
	n, err := strconv.ParseUint(v, 10, 64)
	if err != nil {
		return 0, false, newProblem(http.StatusBadRequest, probInvalidQuery,
			"Last-Event-ID: want an event id this stream sent (a sequence number or terminal), got "+strconv.Quote(v)).field("Last-Event-ID")
	}
	return n, false, nil
}

func oneLine(s string) string {
	b := []byte(s)
	for i, c := range b {
		if c == '\n' || c == '\r' {
			b[i] = ' '
		}
	}
	return string(b)
}
