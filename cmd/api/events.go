package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/personaq/personaq/schemas"
	"net/http"
	"strconv"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// drainWait bounds how long an event stream that saw the terminal record
// waits for the attempt events stored before it.
const drainWait = 2 * time.Second

// sseEvent is one message as read from the attempts or output stream.
type sseEvent struct {
	seq  uint64
	data []byte
}

// events is GET /v1/requests/{id}/events: attempt events and live
// output chunks as they happen, then one terminal event, then the end.
// Each event's id holds the positions written so far in both streams
// (eventPos); Last-Event-ID resumes after both.
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
		after = eventPos{}
	}
	s.streamEvents(r.Context(), w, flusher, wt, st, after)
}

// eventStreams are the two streams an event stream follows.
type eventStreams struct {
	attempts, output <-chan sseEvent
}

// streamEvents follows the request's attempt events and output chunks
// after pos until its terminal record, then writes the terminal event.
func (s *Server) streamEvents(ctx context.Context, w http.ResponseWriter, f http.Flusher, wt *waiter, st *RequestStatus, pos eventPos) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var in eventStreams
	var err error
	if in.attempts, err = s.followAttempts(ctx, st.RequestID, pos.attempts); err != nil {
		fmt.Fprintf(w, ": attempt events unavailable: %s\n\n", oneLine(err.Error()))
		flush(f)
	}
	if in.output, err = s.followOutput(ctx, st.RequestID, pos.output); err != nil {
		fmt.Fprintf(w, ": output unavailable: %s\n\n", oneLine(err.Error()))
		flush(f)
	}
	ka := time.NewTicker(s.cfg.KeepAlive)
	defer ka.Stop()
	out := &eventWriter{w: w, pos: pos, readOutput: pos.output, superseded: s.supersededOutput(ctx, st.RequestID)}
	if st.Terminal() {
		s.finish(ctx, f, in, st, out)
		return
	}
	for {
		select {
		case ev := <-in.attempts:
			out.attempt(ev)
			flush(f)
		case ev := <-in.output:
			out.output(ev)
			flush(f)
		case rec := <-wt.wake:
			if rec != nil {
				st.applyRecord(rec)
			} else if now, err := s.statusOf(ctx, st.RequestID); err == nil {
				st = now
			}
			if st.Terminal() {
				s.finish(ctx, f, in, st, out)
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

// finish writes the attempt events and output chunks stored before the
// terminal record that were not written yet (and an attempt's final chunk,
// published just before the record, when it is still on its way), then
// the terminal event.
func (s *Server) finish(ctx context.Context, f http.Flusher, in eventStreams, st *RequestStatus, out *eventWriter) {
	// The wait for the last attempt's events has a budget of its own, so a
	// request whose attempt events never come still has its output drained.
	upTo := eventPos{attempts: s.lastAttemptSeq(ctx, st.Record, time.Now().Add(drainWait)),
		output: s.lastSeq(ctx, s.cfg.Topology.Output.Stream, s.cfg.Topology.OutputFilter(st.RequestID))}
	timeout := time.NewTimer(drainWait)
	defer timeout.Stop()
	for in.attempts != nil && out.pos.attempts < upTo.attempts || in.output != nil && (out.readOutput < upTo.output || out.open) {
		select {
		case ev := <-in.attempts:
			out.attempt(ev)
		case ev := <-in.output:
			out.output(ev)
		case <-timeout.C:
			in = eventStreams{}
		case <-ctx.Done():
			return
		}
	}
	writeTerminal(out.w, st)
	flush(f)
}

// lastAttemptSeq is the stream sequence of rec's request's last attempt
// event once the events of rec's last attempt are stored (its failure or
// cancel, or a success's start): they are published beside the record, off
// its write's path, and may be stored just after it. It stops looking at
// giveUp (a request that ended without running has none).
func (s *Server) lastAttemptSeq(ctx context.Context, rec *schemas.OutcomeEvent, giveUp time.Time) uint64 {
	const every = 25 * time.Millisecond
	subject := s.cfg.Topology.AttemptFilter(rec.RequestID)
	for {
		seq, data := s.lastMsg(ctx, s.cfg.Topology.AttemptsStream, subject)
		if rec.Attempts <= 0 || lastAttemptStored(rec, data) || !time.Now().Before(giveUp) {
			return seq
		}
		select {
		case <-time.After(every):
		case <-ctx.Done():
			return seq
		}
	}
}

// lastAttemptStored reports whether last (the request's latest attempt
// event) is, or comes after, the last event rec's attempts make.
func lastAttemptStored(rec *schemas.OutcomeEvent, last []byte) bool {
	ev, err := schemas.DecodeAttemptEvent(last)
	if err != nil || ev.Attempt < rec.Attempts {
		return false
	}
	if ev.Attempt > rec.Attempts || rec.Outcome == schemas.OutcomeSucceeded {
		return true
	}
	return ev.Kind == schemas.AttemptFailed || ev.Kind == schemas.AttemptCancelled
}

// lastSeq is the stream sequence of the last message on subject in
// stream (0 when none).
func (s *Server) lastSeq(ctx context.Context, stream, subject string) uint64 {
	seq, _ := s.lastMsg(ctx, stream, subject)
	return seq
}

// lastMsg is the sequence and data of the last message on subject in
// stream (0 and nil when none).
func (s *Server) lastMsg(ctx context.Context, stream, subject string) (uint64, []byte) {
	st, err := s.js.Stream(ctx, stream)
	if err != nil {
		return 0, nil
	}
	raw, err := st.GetLastMsgForSubject(ctx, subject)
	if err != nil {
		return 0, nil
	}
	return raw.Sequence, raw.Data
}

// followAttempts delivers the request's attempt events after seq `after`
// on the returned channel until ctx ends.
func (s *Server) followAttempts(ctx context.Context, requestID string, after uint64) (<-chan sseEvent, error) {
	return s.follow(ctx, s.cfg.Topology.AttemptsStream, s.cfg.Topology.AttemptFilter(requestID), after)
}

// follow delivers the messages on filter in stream after seq `after` on
// the returned channel until ctx ends.
func (s *Server) follow(ctx context.Context, stream, filter string, after uint64) (<-chan sseEvent, error) {
	cfg := jetstream.OrderedConsumerConfig{FilterSubjects: []string{filter}, DeliverPolicy: jetstream.DeliverAllPolicy}
	if after > 0 {
		cfg.DeliverPolicy, cfg.OptStartSeq = jetstream.DeliverByStartSequencePolicy, after+1
	}
	cons, err := s.js.OrderedConsumer(ctx, stream, cfg)
	if err != nil {
		return nil, fmt.Errorf("follow %s on %s: %w", filter, stream, err)
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
		return nil, fmt.Errorf("follow %s on %s: %w", filter, stream, err)
	}
	go func() { <-ctx.Done(); cc.Stop() }()
	return out, nil
}

// eventWriter writes events, each with the positions written so far.
type eventWriter struct {
	w   http.ResponseWriter
	pos eventPos
	// readOutput is the output stream position read (pos.output is the
	// one written: skipped markers move only this one).
	readOutput uint64
	// open: the last output chunk written belongs to an attempt whose
	// final chunk has not been written yet.
	open bool
	// superseded reports whether a retry's opening marker voids output a
	// caller may hold (see Server.supersededOutput).
	superseded func(marker []byte) bool
}

func (e *eventWriter) attempt(ev sseEvent) {
	e.pos.attempts = ev.seq
	writeEvent(e.w, "attempt", e.pos, ev.data)
}

func (e *eventWriter) output(ev sseEvent) {
	e.readOutput = ev.seq
	kind := outputKind(ev.data)
	if kind == "output_superseded" {
		e.open = false
		if !e.superseded(ev.data) {
			// Nothing to void: no event, and the id keeps its position (a
			// resumed stream reads the marker again and skips it again), so
			// a stream without output has the ids it always had.
			return
		}
	} else {
		e.open = !bytes.Contains(ev.data, []byte(`"final":true`))
	}
	e.pos.output = ev.seq
	writeEvent(e.w, kind, e.pos, ev.data)
}

func writeEvent(w http.ResponseWriter, kind string, pos eventPos, data []byte) {
	if bytes.ContainsAny(data, "\r\n") { // one data line per event
		var buf bytes.Buffer
		if json.Compact(&buf, data) == nil {
			data = buf.Bytes()
		}
	}
	fmt.Fprintf(w, "event: %s\nid: %s\ndata: %s\n\n", kind, pos, data)
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

// lastEventID parses Last-Event-ID: positions (eventPos), "terminal" or
// nothing.
func lastEventID(v string) (eventPos, bool, *problem) {
	switch v {
	case "":
		return eventPos{}, false, nil
	case "terminal":
		return eventPos{}, true, nil
	}
	pos, err := parseEventPos(v)
	if err != nil {
		return eventPos{}, false, newProblem(http.StatusBadRequest, probInvalidQuery,
			"Last-Event-ID: want an event id this stream sent (<attempts seq>, <attempts seq>.<output seq> or terminal), got "+strconv.Quote(v)).field("Last-Event-ID")
	}
	return pos, false, nil
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
