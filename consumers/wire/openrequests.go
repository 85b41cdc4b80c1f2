package wire

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/personaq/personaq/schemas"
)

// OpenRequest is a request still in the requests stream: queued, waiting
// for a retry, or running.
type OpenRequest struct {
	Request  *schemas.PersonaRequest
	Sequence uint64
}

// FindOpen reads the requests stream (a work queue: it holds the requests
// not ended yet) and returns those match accepts, in stream order, one per
// request id. A message that does not decode is skipped (the replicas
// quarantine it). A work-queue stream admits no second consumer, so it is
// read message by message, findWorkers ranges of it at once.
func FindOpen(ctx context.Context, js jetstream.JetStream, t Topology, match func(*schemas.PersonaRequest) bool) ([]OpenRequest, error) {
	t = t.WithDefaults()
	s, err := js.Stream(ctx, t.RequestsStream)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", t.RequestsStream, err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", t.RequestsStream, err)
	}
	first, last := info.State.FirstSeq, info.State.LastSeq
	if info.State.Msgs == 0 {
		return nil, nil
	}
	if info.Config.Retention == jetstream.LimitsPolicy {
		first = max(first, unackedFrom(ctx, js, t, s)) // acked requests wait there for the trimmer
	}
	parts := make([][]OpenRequest, findWorkers)
	errs := make([]error, findWorkers)
	span := (last - first + findWorkers) / findWorkers
	var wg sync.WaitGroup
	for i := range uint64(findWorkers) {
		from, to := first+i*span, min(first+(i+1)*span-1, last)
		if from > last {
			break
		}
		wg.Go(func() { parts[i], errs[i] = findIn(ctx, s, t.RequestsPrefix+".>", from, to, match) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("read %s: %w", t.RequestsStream, err)
	}
	var out []OpenRequest
	seen := map[string]bool{}
	for _, p := range parts {
		for _, o := range p {
			if !seen[o.Request.RequestID] {
				seen[o.Request.RequestID] = true
				out = append(out, o)
			}
		}
	}
	return out, nil
}

// findWorkers is how many ranges of the requests stream FindOpen reads at
// once.
const findWorkers = 8

// findIn reads the messages from sequence from to to (inclusive).
func findIn(ctx context.Context, s jetstream.Stream, filter string, from, to uint64, match func(*schemas.PersonaRequest) bool) ([]OpenRequest, error) {
	var out []OpenRequest
	for seq := from; seq <= to; {
		raw, err := s.GetMsg(ctx, seq, jetstream.WithGetMsgSubject(filter))
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		if raw.Sequence > to {
			return out, nil
		}
		if req, err := schemas.DecodeRequest(raw.Data); err == nil && match(req) {
			out = append(out, OpenRequest{Request: req, Sequence: raw.Sequence})
		}
		seq = raw.Sequence + 1
	}
	return out, nil
}

// LatestAttempt returns the newest attempt event of requestID (nil when
// none is kept).
func LatestAttempt(ctx context.Context, js jetstream.JetStream, t Topology, requestID string) (*schemas.AttemptEvent, error) {
	t = t.WithDefaults()
	s, err := js.Stream(ctx, t.AttemptsStream)
	if err != nil {
		return nil, fmt.Errorf("attempts stream %s: %w", t.AttemptsStream, err)
	}
	raw, err := s.GetLastMsgForSubject(ctx, t.AttemptFilter(requestID))
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("attempt events of %s: %w", requestID, err)
	}
	return schemas.DecodeAttemptEvent(raw.Data)
}

// CancellationOf describes an open request for Cancel.
func CancellationOf(req *schemas.PersonaRequest, reason, by string) Cancellation {
	return Cancellation{RequestID: req.RequestID, Persona: req.Persona, TaskID: req.TaskID, Step: req.Step,
		Reason: reason, By: by, CorrelationID: req.CorrelationID, SubmittedAt: req.CreatedAt}
}

// cancelWindow is how many cancels of one task are in flight at once.
const cancelWindow = 64

// CancelAll cancels every request in open, cancelWindow at a time, and
// returns the record that stands for each (the cancelled one, or the one
// that won: errors match ErrAlreadyEnded then), in open's order.
func CancelAll(ctx context.Context, js jetstream.JetStream, t Topology, open []OpenRequest, reason, by string) ([]*schemas.OutcomeEvent, []error) {
	recs, errs := make([]*schemas.OutcomeEvent, len(open)), make([]error, len(open))
	sem := make(chan struct{}, cancelWindow)
	var wg sync.WaitGroup
	for i, o := range open {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			recs[i], errs[i] = Cancel(ctx, js, t, CancellationOf(o.Request, reason, by))
		})
	}
	wg.Wait()
	return recs, errs
}

// unackedFrom is the lowest sequence above every consumer's ack floor on a
// limits-retention requests stream: below it every request was acked (or
// given up) and waits only to be trimmed. 0 (the whole stream is read)
// when it cannot be read, or when requests wait on a subject no consumer
// serves (no ack floor covers them).
func unackedFrom(ctx context.Context, js jetstream.JetStream, t Topology, s jetstream.Stream) uint64 {
	if unserved, err := UnservedRequests(ctx, js, t); err != nil || len(unserved) > 0 {
		return 0
	}
	var from uint64
	first := true
	l := s.ListConsumers(ctx)
	for ci := range l.Info() {
		if first || ci.AckFloor.Stream+1 < from {
			from, first = ci.AckFloor.Stream+1, false
		}
	}
	if l.Err() != nil && !errors.Is(l.Err(), jetstream.ErrEndOfData) {
		return 0
	}
	return from
}
