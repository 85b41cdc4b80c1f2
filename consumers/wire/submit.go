package wire

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/personaq/personaq/schemas"
)

// Every submit path (the Go client, `personaq publish`, the HTTP API)
// goes through Submitter.Submit: the request is stored (Nats-Msg-Id =
// request id), then a queued attempt event is published on the attempts
// stream carrying the request's content digest, deadline and created_at.
// A request id already used is looked up (queued event, then terminal
// record, then the stored request the duplicate PubAck points at) and
// compared by digest: the same content is the same request (idempotent,
// the first submission's deadline stands); other content is a conflict.

// Submission says what Submit did.
type Submission struct {
	RequestID string
	// Stream and Sequence are where the request is stored (zero when a
	// duplicate was recognised before publishing).
	Stream   string
	Sequence uint64
	// Duplicate: the same request was already submitted; nothing new was
	// stored and Deadline is the first submission's.
	Duplicate bool
	// Deadline is the request's step deadline (zero: none, or not known
	// for a duplicate whose queued event is gone).
	Deadline time.Time
	// Digest is schemas.RequestDigest of the request.
	Digest string
}

// Submitter publishes requests the way every submit path must. Safe for
// concurrent use.
type Submitter struct {
	js       jetstream.JetStream
	topo     Topology
	outcomes *Outcomes

	mu       sync.Mutex
	attempts jetstream.Stream
	requests jetstream.Stream
}

// NewSubmitter returns a Submitter on t's streams.
func NewSubmitter(js jetstream.JetStream, t Topology, outcomes *Outcomes) *Submitter {
	t = t.WithDefaults()
	if outcomes == nil {
		outcomes = NewOutcomes(js, t)
	}
	return &Submitter{js: js, topo: t, outcomes: outcomes}
}

// dupPollWait bounds how long a duplicate whose stored request was already
// taken waits for the first submitter's queued event.
const dupPollWait = 2 * time.Second

// Submit stores req with the step deadline (zero: none) unless a request
// with its id exists: then it returns that submission (Duplicate) when the
// content is the same, and a *ConflictError when it is not.
func (s *Submitter) Submit(ctx context.Context, req *schemas.PersonaRequest, deadline time.Time, opts ...PublishOption) (*Submission, error) {
	digest := schemas.RequestDigest(req)
	if sub, err := s.prior(ctx, req.RequestID, digest); sub != nil || err != nil {
		return sub, err
	}
	ack, err := PublishRequest(ctx, s.js, s.topo, req, append([]PublishOption{WithDeadline(deadline)}, opts...)...)
	if err != nil {
		return nil, err
	}
	sub := &Submission{RequestID: req.RequestID, Stream: ack.Stream, Sequence: ack.Sequence, Deadline: deadline, Digest: digest}
	if ack.Duplicate {
		return s.duplicate(ctx, req, sub)
	}
	if err := s.publishQueued(ctx, req, deadline, digest); err != nil {
		return nil, err
	}
	return sub, nil
}

// prior looks for an earlier submission of requestID: its queued event,
// else its terminal record. Nil, nil when there is none.
func (s *Submitter) prior(ctx context.Context, requestID, digest string) (*Submission, error) {
	var (
		wg     sync.WaitGroup
		q      *schemas.AttemptEvent
		rec    *schemas.OutcomeEvent
		qErr   error
		recErr error
	)
	wg.Add(1)
	go func() { defer wg.Done(); rec, recErr = s.outcomes.Lookup(ctx, requestID) }()
	q, qErr = s.Queued(ctx, requestID)
	wg.Wait()
	switch {
	case q != nil:
		return s.compare(requestID, digest, q.RequestDigest, q.Deadline, q, rec, nil)
	case rec != nil:
		return s.compare(requestID, digest, rec.RequestDigest, time.Time{}, nil, rec, nil)
	case qErr != nil && !errors.Is(qErr, ErrNoAttemptEvent):
		return nil, qErr
	case recErr != nil && !errors.Is(recErr, ErrNoOutcome) && !errors.Is(recErr, jetstream.ErrStreamNotFound):
		return nil, recErr
	}
	return nil, nil
}

// compare makes the answer to a submit of an id already used: the first
// submission (same digest, or no digest to compare with) or a conflict.
func (s *Submitter) compare(id, digest, stored string, deadline time.Time, q *schemas.AttemptEvent, rec *schemas.OutcomeEvent, req *schemas.PersonaRequest) (*Submission, error) {
	if stored != "" && stored != digest {
		return nil, &ConflictError{RequestID: id, Digest: digest, StoredDigest: stored, Queued: q, Record: rec, Stored: req}
	}
	return &Submission{RequestID: id, Duplicate: true, Deadline: deadline, Digest: digest}, nil
}

// duplicate answers a publish JetStream stored as a duplicate: the stored
// request (where the PubAck points) is compared while it is still queued;
// once taken, the first submitter's queued event is awaited briefly.
func (s *Submitter) duplicate(ctx context.Context, req *schemas.PersonaRequest, sub *Submission) (*Submission, error) {
	stored, deadline, err := s.storedRequest(ctx, sub.Sequence, req.RequestID)
	if err == nil {
		out, cerr := s.compare(req.RequestID, sub.Digest, schemas.RequestDigest(stored), deadline, nil, nil, stored)
		if cerr == nil {
			out.Stream, out.Sequence = sub.Stream, sub.Sequence
			// The first submitter may have died between its publish and
			// its queued event: publishing it again is deduplicated.
			_ = s.publishQueued(ctx, stored, deadline, out.Digest)
		}
		return out, cerr
	}
	poll := time.NewTicker(50 * time.Millisecond)
	defer poll.Stop()
	until := time.Now().Add(dupPollWait)
	for {
		if found, perr := s.prior(ctx, req.RequestID, sub.Digest); found != nil || perr != nil || time.Now().After(until) {
			if found == nil && perr == nil { // nothing left to compare with: the same request as far as anyone can tell
				found = &Submission{RequestID: req.RequestID, Duplicate: true, Digest: sub.Digest}
			}
			return found, perr
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("submit %s: %w", req.RequestID, context.Cause(ctx))
		case <-poll.C:
		}
	}
}

// storedRequest reads the request stored at seq on the requests stream,
// with its deadline header; an error when it is gone or another request.
func (s *Submitter) storedRequest(ctx context.Context, seq uint64, id string) (*schemas.PersonaRequest, time.Time, error) {
	st, err := s.stream(ctx, &s.requests, s.topo.RequestsStream)
	if err != nil {
		return nil, time.Time{}, err
	}
	raw, err := st.GetMsg(ctx, seq)
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("stored request %s: %w", id, err)
	}
	req, err := schemas.DecodeRequest(raw.Data)
	if err != nil || req.RequestID != id {
		return nil, time.Time{}, fmt.Errorf("stored request %s at seq %d: not it", id, seq)
	}
	deadline, _ := time.Parse(time.RFC3339Nano, raw.Header.Get(schemas.HeaderDeadline))
	return req, deadline, nil
}

// publishQueued stores the queued event of req, deduplicated by request
// id, and waits for JetStream to confirm it. Without an attempts stream
// (attempt events off everywhere) there is nothing to do.
func (s *Submitter) publishQueued(ctx context.Context, req *schemas.PersonaRequest, deadline time.Time, digest string) error {
	ev := QueuedEvent(req, deadline, digest)
	data, err := schemas.MarshalAttempt(ev)
	if err != nil {
		return fmt.Errorf("queued event of %s: %w", req.RequestID, err)
	}
	msg := &nats.Msg{Subject: s.topo.AttemptSubject(req.RequestID, string(schemas.AttemptQueued)), Data: data, Header: nats.Header{}}
	msg.Header.Set(jetstream.MsgIDHeader, "queued:"+req.RequestID)
	_, err = s.js.PublishMsg(ctx, msg)
	if errors.Is(err, jetstream.ErrNoStreamResponse) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("publish queued event of %s (the request is stored): %w", req.RequestID, err)
	}
	return nil
}

// QueuedEvent is the queued attempt event of req.
func QueuedEvent(req *schemas.PersonaRequest, deadline time.Time, digest string) *schemas.AttemptEvent {
	ev := &schemas.AttemptEvent{
		SchemaVersion: schemas.Version, RequestID: req.RequestID, TaskID: req.TaskID, Step: req.Step,
		Persona: req.Persona, Kind: schemas.AttemptQueued, CorrelationID: req.CorrelationID,
		At: time.Now().UTC(), CreatedAt: req.CreatedAt.UTC(), RequestDigest: digest,
	}
	if !deadline.IsZero() {
		ev.Deadline = deadline.UTC()
	}
	return ev
}

// Queued returns requestID's queued event, or an error matching
// ErrNoAttemptEvent.
func (s *Submitter) Queued(ctx context.Context, requestID string) (*schemas.AttemptEvent, error) {
	return s.LastAttempt(ctx, s.topo.AttemptSubject(requestID, string(schemas.AttemptQueued)))
}

// LastAttempt returns the last attempt event on subject (a filter of the
// attempts stream), or an error matching ErrNoAttemptEvent.
func (s *Submitter) LastAttempt(ctx context.Context, subject string) (*schemas.AttemptEvent, error) {
	st, err := s.stream(ctx, &s.attempts, s.topo.AttemptsStream)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return nil, ErrNoAttemptEvent
	}
	if err != nil {
		return nil, err
	}
	raw, err := st.GetLastMsgForSubject(ctx, subject)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return nil, ErrNoAttemptEvent
	}
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", subject, err)
	}
	ev, err := schemas.DecodeAttemptEvent(raw.Data)
	if err != nil {
		return nil, fmt.Errorf("%s (seq %d): %w", subject, raw.Sequence, err)
	}
	return ev, nil
}

func (s *Submitter) stream(ctx context.Context, into *jetstream.Stream, name string) (jetstream.Stream, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if *into == nil {
		st, err := s.js.Stream(ctx, name)
		if err != nil {
			return nil, fmt.Errorf("stream %s: %w", name, err)
		}
		*into = st
	}
	return *into, nil
}
