package api

import (
	"errors"
	"math"
	"net/http"
	"strconv"
	"time"
)

// get is GET /v1/requests/{id}[?wait=30s]: the status now, or once the
// request is terminal or the wait ends.
func (s *Server) get(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	wait, prob := s.parseWait(r.URL.Query().Get("wait"))
	if prob != nil {
		writeProblem(w, prob)
		return
	}
	var wt *waiter
	if wait > 0 { // registered before the lookup: a record written in between wakes it
		wt = s.waiters.add(id)
		if s.park(w, wt, id, wait) != nil {
			return
		}
		defer s.waiters.remove(wt)
	}
	st, err := s.statusOf(r.Context(), id)
	switch {
	case errors.Is(err, errNotFound):
		writeProblem(w, newProblem(http.StatusNotFound, probNotFound, "no request "+id+" is known").field("id"))
		return
	case err != nil:
		s.fail(w, r, err)
		return
	}
	if wt != nil && !st.Terminal() {
		st = s.await(r, wt, st, wait)
	}
	writeJSON(w, http.StatusOK, st)
}

// await waits until the request is terminal, the wait ends or the caller
// goes; it returns the status then.
func (s *Server) await(r *http.Request, wt *waiter, st *RequestStatus, wait time.Duration) *RequestStatus {
	timer := time.NewTimer(wait)
	defer timer.Stop()
	for {
		select {
		case rec := <-wt.wake:
			if rec != nil {
				st.applyRecord(rec)
				return st
			}
			if now, err := s.statusOf(r.Context(), st.RequestID); err == nil {
				st = now
				if st.Terminal() {
					return st
				}
			}
		case <-timer.C:
			if now, err := s.statusOf(r.Context(), st.RequestID); err == nil {
				return now
			}
			return st
		case <-r.Context().Done():
			return st
		}
	}
}

// parseWait reads ?wait= (a Go duration or seconds), clamped to MaxWait.
func (s *Server) parseWait(v string) (time.Duration, *problem) {
	if v == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		secs, ferr := strconv.ParseFloat(v, 64)
		if ferr != nil || math.IsNaN(secs) {
			return 0, newProblem(http.StatusBadRequest, probInvalidQuery, "wait: want a duration (30s) or seconds (30), got "+strconv.Quote(v)).field("wait")
		}
		d = time.Duration(min(secs, s.cfg.MaxWait.Seconds()) * float64(time.Second))
	}
	if d < 0 {
		return 0, newProblem(http.StatusBadRequest, probInvalidQuery, "wait: must not be negative").field("wait")
	}
	return min(d, s.cfg.MaxWait), nil
}
