package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/personaq/personaq/schemas"
)

// A long-poll is parked as it arrives: its connection is taken from
// net/http (Hijack) and held with its waiter and a timer, without a
// goroutine or net/http's per-connection buffers (about 20 KB a
// connection: 400 MB for 10,000 waiting callers). Its first lookup runs on
// a bounded pool of workers; the answer is written when the record comes
// or the wait ends, with Connection: close. Stop closes what is parked.

// parked is one long-poll held without a goroutine.
type parked struct {
	s    *Server
	id   string
	conn net.Conn
	wt   *waiter
	once sync.Once

	mu    sync.Mutex // guards timer and st, set while callbacks may run
	timer *time.Timer
	st    *RequestStatus // nil until the first lookup answered
}

// park takes the connection of a long-poll; nil when it cannot (HTTP/2, a
// recorder), and the caller waits the usual way.
func (s *Server) park(w http.ResponseWriter, wt *waiter, id string, wait time.Duration) *parked {
	hj, ok := w.(http.Hijacker)
	if !ok {
		return nil
	}
	conn, _, err := hj.Hijack()
	if err != nil {
		return nil
	}
	_ = conn.SetDeadline(time.Time{})
	p := &parked{s: s, id: id, conn: conn, wt: wt}
	p.mu.Lock()
	s.parkMu.Lock()
	s.parkedSet[p] = struct{}{}
	s.parkMu.Unlock()
	s.waiters.setFire(wt, p.wake)
	p.timer = time.AfterFunc(wait, func() { p.answer(nil, true) })
	p.mu.Unlock()
	select { // a record given as it registered
	case rec := <-wt.wake:
		go p.wake(rec)
	default:
	}
	select {
	case s.lookupQ <- p:
	default:
		go s.firstLookup(p)
	}
	return p
}

// lookupWorker runs parked long-polls' first lookups until ctx ends.
func (s *Server) lookupWorker(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case p := <-s.lookupQ:
			s.firstLookup(p)
		}
	}
}

// firstLookup answers a parked long-poll at once when the request is
// unknown, the lookup failed or it is terminal; otherwise it waits on.
func (s *Server) firstLookup(p *parked) {
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.OpTimeout)
	st, err := s.statusOf(ctx, p.id)
	cancel()
	switch {
	case errors.Is(err, errNotFound):
		p.finish(newProblem(http.StatusNotFound, probNotFound, "no request "+p.id+" is known").field("id"), nil)
		return
	case err != nil:
		prob := newProblem(http.StatusInternalServerError, "internal", err.Error())
		if isUnavailable(err) || !s.nc.IsConnected() {
			prob = newProblem(http.StatusServiceUnavailable, probUnavailable, "NATS is unreachable: "+err.Error())
		}
		p.finish(prob, nil)
		return
	}
	p.mu.Lock()
	if p.st == nil {
		p.st = st
	}
	p.mu.Unlock()
	if st.Terminal() {
		p.finish(nil, st)
	}
}

// wake is the waiter's callback: a record, or nil for "look again".
func (p *parked) wake(rec *schemas.OutcomeEvent) { p.answer(rec, false) }

// answer writes the status: with rec when given; otherwise after a new
// lookup, and only if it is terminal or the wait is over.
func (p *parked) answer(rec *schemas.OutcomeEvent, waitOver bool) {
	p.mu.Lock()
	var st RequestStatus // wakes may race: each works on its own copy
	if p.st != nil {
		st = *p.st
	}
	p.mu.Unlock()
	if rec != nil {
		st.RequestID = p.id
		st.applyRecord(rec)
		p.finish(nil, &st)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), p.s.cfg.OpTimeout)
	now, err := p.s.statusOf(ctx, p.id)
	cancel()
	switch {
	case err == nil && (now.Terminal() || waitOver):
		p.finish(nil, now)
	case waitOver && st.RequestID != "":
		p.finish(nil, &st)
	case waitOver && errors.Is(err, errNotFound):
		p.finish(newProblem(http.StatusNotFound, probNotFound, "no request "+p.id+" is known").field("id"), nil)
	case waitOver:
		p.finish(newProblem(http.StatusServiceUnavailable, probUnavailable, fmt.Sprintf("NATS is unreachable: %v", err)), nil)
	}
}

// finish writes the answer (a problem, or the status) once and closes the
// connection.
func (p *parked) finish(prob *problem, st *RequestStatus) {
	p.once.Do(func() {
		p.release()
		code, ctype, extra := http.StatusOK, "application/json", ""
		var body []byte
		if prob != nil {
			code, ctype = prob.Status, "application/problem+json"
			body, _ = json.Marshal(prob)
			if code == http.StatusServiceUnavailable {
				extra = fmt.Sprintf("Retry-After: %d\r\n", int(p.s.cfg.RetryAfter.Round(time.Second).Seconds()))
			}
		} else {
			body, _ = json.Marshal(st)
		}
		var b strings.Builder
		fmt.Fprintf(&b, "HTTP/1.1 %d %s\r\nContent-Type: %s\r\nCache-Control: no-store\r\n%sConnection: close\r\nContent-Length: %d\r\n\r\n",
			code, http.StatusText(code), ctype, extra, len(body)+1)
		_ = p.conn.SetWriteDeadline(time.Now().Add(10 * time.Second))
		_, _ = p.conn.Write(append([]byte(b.String()), append(body, '\n')...))
		_ = p.conn.Close()
	})
}

// release stops the timer and forgets p.
func (p *parked) release() {
	p.mu.Lock()
	if p.timer != nil {
		p.timer.Stop()
	}
	p.mu.Unlock()
	p.s.waiters.remove(p.wt)
	p.s.parkMu.Lock()
	delete(p.s.parkedSet, p)
	p.s.parkMu.Unlock()
}

// closeParked drops every parked long-poll (the callers reconnect).
func (s *Server) closeParked() {
	s.parkMu.Lock()
	all := make([]*parked, 0, len(s.parkedSet))
	for p := range s.parkedSet {
		all = append(all, p)
	}
	s.parkMu.Unlock()
	for _, p := range all {
		p.once.Do(func() {
			p.release()
			_ = p.conn.Close()
		})
	}
}
