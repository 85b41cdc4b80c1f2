package api

import (
	"encoding/base64"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/personaq/personaq/schemas"
)

const (
	defaultLimit = 50
	maxLimit     = 500
)

// RequestList is the body of GET /v1/requests.
type RequestList struct {
	Requests   []RequestStatus `json:"requests"`
	NextCursor string          `json:"next_cursor,omitempty"`
	// Truncated: the index dropped older requests to stay within its
	// bound, so the list is not complete.
	Truncated bool `json:"truncated,omitempty"`
}

// list is GET /v1/requests?task_id=&persona=&status=&limit=&cursor=.
func (s *Server) list(w http.ResponseWriter, r *http.Request) {
	q, prob := parseListQuery(r)
	if prob != nil {
		writeProblem(w, prob)
		return
	}
	page, more, truncated := s.index.list(q)
	out := RequestList{Requests: page, Truncated: truncated}
	if more {
		out.NextCursor = encodeCursor(&page[len(page)-1])
	}
	if truncated {
		w.Header().Set("Personaq-Index-Truncated", "true")
	}
	writeJSON(w, http.StatusOK, out)
}

var validStatuses = append([]string{statusQueued, statusRunning, statusRetrying, "cancelled"}, outcomeNames()...)

func outcomeNames() []string {
	out := make([]string, 0, len(schemas.Outcomes))
	for _, o := range schemas.Outcomes {
		out = append(out, string(o))
	}
	return out
}

func parseListQuery(r *http.Request) (listQuery, *problem) {
	v := r.URL.Query()
	q := listQuery{task: v.Get("task_id"), personas: splitList(v["persona"]), statuses: splitList(v["status"]), limit: defaultLimit}
	for _, st := range q.statuses {
		if !slices.Contains(validStatuses, st) {
			return q, newProblem(http.StatusBadRequest, probInvalidQuery,
				"status: "+strconv.Quote(st)+" is not one of "+strings.Join(validStatuses, ", ")).field("status")
		}
	}
	if l := v.Get("limit"); l != "" {
		n, err := strconv.Atoi(l)
		if err != nil || n < 1 {
			return q, newProblem(http.StatusBadRequest, probInvalidQuery, "limit: want an integer from 1 to 500").field("limit")
		}
		q.limit = min(n, maxLimit)
	}
	if c := v.Get("cursor"); c != "" {
		after, ok := decodeCursor(c)
		if !ok {
			return q, newProblem(http.StatusBadRequest, probInvalidQuery, "cursor: not a next_cursor this API returned").field("cursor")
		}
		q.after = after
	}
	return q, nil
}

// A cursor is the last entry of a page: its created_at and request id.
func encodeCursor(st *RequestStatus) string {
	raw := strconv.FormatInt(st.CreatedAt.UnixNano(), 10) + "|" + st.RequestID
	return base64.RawURLEncoding.EncodeToString([]byte(raw))
}

func decodeCursor(c string) (*entry, bool) {
	raw, err := base64.RawURLEncoding.DecodeString(c)
	if err != nil {
		return nil, false
	}
	ns, id, ok := strings.Cut(string(raw), "|")
	n, err := strconv.ParseInt(ns, 10, 64)
	if !ok || err != nil || id == "" {
		return nil, false
	}
	return &entry{RequestStatus: RequestStatus{RequestID: id, CreatedAt: time.Unix(0, n)}}, true
}
