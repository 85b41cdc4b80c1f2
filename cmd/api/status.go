package api

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/personaq/personaq/consumers/wire"
	"github.com/personaq/personaq/schemas"
)

// Non-terminal statuses; a terminal one is its record's outcome.
const (
	statusQueued   = "queued"
	statusRunning  = "running"
	statusRetrying = "retrying"
)

// RequestStatus is where a request is: the body of GET /v1/requests/{id},
// of submit answers and of the terminal event.
type RequestStatus struct {
	RequestID     string                `json:"request_id"`
	Status        string                `json:"status"`
	Persona       string                `json:"persona"`
	TaskID        string                `json:"task_id"`
	Step          string                `json:"step"`
	Attempts      int                   `json:"attempts"`
	Deadline      time.Time             `json:"deadline,omitzero"`
	CreatedAt     time.Time             `json:"created_at,omitzero"`
	NextAttemptAt time.Time             `json:"next_attempt_at,omitzero"`
	LastError     string                `json:"last_error,omitempty"`
	Record        *schemas.OutcomeEvent `json:"record,omitempty"`
}

// Terminal reports whether the request has its terminal record.
func (s *RequestStatus) Terminal() bool { return s.Record != nil }

// errNotFound: nothing is known of the request id.
var errNotFound = errors.New("no such request")

// lookups is what NATS holds of one request: its terminal record and its
// latest attempt event of each kind.
type lookups struct {
	rec                     *schemas.OutcomeEvent
	queued, started, failed *schemas.AttemptEvent
	err                     error
}

// statusOf reads requestID's status from NATS: the terminal record and
// the latest queued, started and failed events, read concurrently.
func (s *Server) statusOf(ctx context.Context, requestID string) (*RequestStatus, error) {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.OpTimeout)
	defer cancel()
	select { // bounded: 10,000 long-polls arriving at once must not make 40,000 lookups at once
	case s.lookups <- struct{}{}:
		defer func() { <-s.lookups }()
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	var l lookups
	var mu sync.Mutex
	var wg sync.WaitGroup
	keep := func(err error) {
		if err != nil && !errors.Is(err, wire.ErrNoOutcome) && !errors.Is(err, wire.ErrNoAttemptEvent) {
			mu.Lock()
			l.err = errors.Join(l.err, err)
			mu.Unlock()
		}
	}
	wg.Add(3)
	go func() { defer wg.Done(); var err error; l.rec, err = s.records.Lookup(ctx, requestID); keep(err) }()
	go func() {
		defer wg.Done()
		var err error
		l.started, err = s.lastAttempt(ctx, requestID, schemas.AttemptStarted)
		keep(err)
	}()
	go func() {
		defer wg.Done()
		var err error
		l.failed, err = s.lastAttempt(ctx, requestID, schemas.AttemptFailed)
		keep(err)
	}()
	var err error
	l.queued, err = s.lastAttempt(ctx, requestID, schemas.AttemptQueued)
	keep(err)
	wg.Wait()
	if l.err != nil {
		return nil, l.err
	}
	return l.status(requestID)
}

func (s *Server) lastAttempt(ctx context.Context, requestID string, kind schemas.AttemptKind) (*schemas.AttemptEvent, error) {
	return s.submitter.LastAttempt(ctx, s.cfg.Topology.AttemptSubject(requestID, string(kind)))
}

// status combines the lookups: the record decides when there is one;
// otherwise the latest attempt started, and whether it failed.
func (l *lookups) status(requestID string) (*RequestStatus, error) {
	st := &RequestStatus{RequestID: requestID}
	if q := l.queued; q != nil {
		st.Persona, st.TaskID, st.Step, st.Deadline, st.CreatedAt = q.Persona, q.TaskID, q.Step, q.Deadline, q.CreatedAt
		st.Status = statusQueued
	}
	for _, ev := range []*schemas.AttemptEvent{l.started, l.failed} {
		if ev != nil && st.Persona == "" {
			st.Persona, st.TaskID, st.Step = ev.Persona, ev.TaskID, ev.Step
		}
	}
	if l.started != nil {
		st.Status, st.Attempts = statusRunning, l.started.Attempt
	}
	if f := l.failed; f != nil {
		st.LastError = f.Error
		st.Attempts = max(st.Attempts, f.Attempt)
		if f.Attempt >= st.Attempts && f.NextAttempt > 0 {
			st.Status = statusRetrying
			st.NextAttemptAt = f.At.Add(time.Duration(f.NextDelayMs) * time.Millisecond)
		}
	}
	if l.rec != nil {
		st.applyRecord(l.rec)
	}
	if st.Status == "" {
		return nil, errNotFound
	}
	return st, nil
}

// applyRecord makes st the terminal status of rec.
func (st *RequestStatus) applyRecord(rec *schemas.OutcomeEvent) {
	st.Status, st.Record, st.Attempts = string(rec.Outcome), rec, rec.Attempts
	st.Persona, st.TaskID, st.Step = rec.Persona, rec.TaskID, rec.Step
	st.NextAttemptAt, st.LastError = time.Time{}, rec.LastError
	if st.CreatedAt.IsZero() {
		st.CreatedAt = rec.SubmittedAt
	}
}
