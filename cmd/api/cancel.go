package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/personaq/personaq/consumers/client"
	"github.com/personaq/personaq/schemas"
)

// maxCancelBody bounds a cancel body ({"reason": "…"}).
const maxCancelBody = 64 << 10

// cancelBody is the body of both cancel routes; it may be empty.
type cancelBody struct {
	Reason string `json:"reason"`
}

// TaskCancelled is the answer of POST /v1/tasks/{task_id}/cancel.
type TaskCancelled struct {
	TaskID string `json:"task_id"`
	// Cancelled are the requests this call cancelled.
	Cancelled []*RequestStatus `json:"cancelled"`
	// AlreadyEnded are the open requests that ended another way first.
	AlreadyEnded []*RequestStatus `json:"already_ended"`
}

// cancelRequest is POST /v1/requests/{id}/cancel: 200 with the status
// whose record is the cancelled one; 409 conflict with the status whose
// record won when the request had already ended; 404 for an unknown id.
func (s *Server) cancelRequest(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	body, prob := decodeCancel(w, r)
	if prob != nil {
		writeProblem(w, prob)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), s.cfg.OpTimeout)
	defer cancel()
	rec, err := s.client.Cancel(ctx, id, body.Reason, client.CancelledBy(tokenName(r)))
	switch {
	case errors.Is(err, client.ErrUnknownRequest):
		writeProblem(w, newProblem(http.StatusNotFound, probNotFound, "no request "+id+" is known").field("id"))
		return
	case errors.Is(err, client.ErrAlreadyEnded):
		writeProblem(w, newProblem(http.StatusConflict, probConflict,
			fmt.Sprintf("request %s already ended: %s", id, rec.Outcome)).with("request", s.statusWith(r.Context(), rec)))
		return
	case err != nil:
		s.fail(w, r, err)
		return
	}
	s.log.Info().Str("request_id", id).Str("token", tokenName(r)).Msg("api: request cancelled")
	writeJSON(w, http.StatusOK, s.statusWith(r.Context(), rec))
}

// cancelTask is POST /v1/tasks/{task_id}/cancel: every open request of the
// task is cancelled; 200 with those cancelled and those that had ended.
func (s *Server) cancelTask(w http.ResponseWriter, r *http.Request) {
	task := r.PathValue("task_id")
	body, prob := decodeCancel(w, r)
	if prob != nil {
		writeProblem(w, prob)
		return
	}
	res, err := s.client.CancelTask(r.Context(), task, body.Reason, client.CancelledBy(tokenName(r)))
	if err != nil && res == nil {
		s.fail(w, r, err)
		return
	}
	out := &TaskCancelled{TaskID: task, Cancelled: []*RequestStatus{}, AlreadyEnded: []*RequestStatus{}}
	for _, rec := range res.Cancelled {
		out.Cancelled = append(out.Cancelled, s.statusWith(r.Context(), rec))
	}
	for _, rec := range res.AlreadyEnded {
		out.AlreadyEnded = append(out.AlreadyEnded, s.statusWith(r.Context(), rec))
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	s.log.Info().Str("task_id", task).Int("cancelled", len(out.Cancelled)).Str("token", tokenName(r)).Msg("api: task cancelled")
	writeJSON(w, http.StatusOK, out)
}

// statusWith is the status of rec's request with rec as its record.
func (s *Server) statusWith(ctx context.Context, rec *schemas.OutcomeEvent) *RequestStatus {
	st, err := s.statusOf(ctx, rec.RequestID)
	if err != nil {
		st = &RequestStatus{RequestID: rec.RequestID}
	}
	st.applyRecord(rec)
	return st
}

// decodeCancel reads the optional {"reason": "…"} body.
func decodeCancel(w http.ResponseWriter, r *http.Request) (cancelBody, *problem) {
	var body cancelBody
	raw, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxCancelBody))
	var tooLarge *http.MaxBytesError
	switch {
	case errors.As(err, &tooLarge):
		return body, newProblem(http.StatusRequestEntityTooLarge, probTooLarge, "a cancel body is at most 64 KiB").with("limit_bytes", maxCancelBody)
	case err != nil:
		return body, newProblem(http.StatusBadRequest, probInvalidJSON, err.Error())
	case len(strings.TrimSpace(string(raw))) == 0:
		return body, nil
	}
	dec := json.NewDecoder(strings.NewReader(string(raw)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&body); err != nil {
		if f, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
			return body, newProblem(http.StatusBadRequest, probInvalidField, "unknown field "+f).field(strings.Trim(f, `"`))
		}
		return body, newProblem(http.StatusBadRequest, probInvalidJSON, "cancel body: "+err.Error())
	}
	return body, nil
}
