package consumers

import (
	"context"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/personaq/personaq/consumers/transport"
	"github.com/personaq/personaq/schemas"
)

// queueWaitRule is the waiting-request scan's rule for queue waits
// (waitscan.go): a request not yet delivered whose queue wait has passed
// ends there, unrun, the way queueWaited ends it on delivery (one code
// path, endQueueWait): deadline_exceeded, reason queue_wait_exceeded. So a
// request behind busy worker slots or an open circuit ends on time, not
// when it is finally delivered.
//
// It reads only requests above the consumer's delivered stream sequence:
// never delivered, so never started. A request delivered after the pass
// read that sequence is delivered after the pass's clock reading, by which
// its queue wait had already passed: its delivery ends it too (queueWaited
// runs before any attempt begins), and the create-once terminal record
// makes both one.
type queueWaitRule struct {
	r      *Runtime
	stream jetstream.Stream
	by     map[string]*queueWaitSeen
}

// queueWaitSeen is what the rule knows of one persona's undelivered
// requests: every one up to through needs no more reading (ended, or not a
// request), and so does each in ended, above it. A pass starts after
// through, so the requests it already ended do not use up its bound.
type queueWaitSeen struct {
	through uint64
	ended   map[uint64]struct{}
}

func newQueueWaitRule(r *Runtime) *queueWaitRule {
	return &queueWaitRule{r: r, by: map[string]*queueWaitSeen{}}
}

// pass ends persona's undelivered requests whose queue wait has passed. A
// persona runs it when its policy has a queue wait, or once one of its
// requests ran under one (a request's own queue_wait_ms or preset).
func (q *queueWaitRule) pass(ctx context.Context, persona string) {
	p := q.r.personas[persona]
	if p == nil || (p.policy.QueueWait <= 0 && !p.queueWaits.Load()) {
		return
	}
	now := q.r.now() // before the delivered sequence is read: see queueWaitRule
	from, ok := q.undelivered(ctx, persona)
	if !ok || !q.open(ctx) {
		return
	}
	seen := q.seenOf(persona, from)
	contiguous := true // every request read so far in this pass needs no more reading
	q.r.readWaiting(ctx, q.stream, persona, max(from, seen.through+1), func(raw *jetstream.RawStreamMsg) {
		_, done := seen.ended[raw.Sequence]
		if !done && !q.endIfWaited(p, raw, now) {
			contiguous = false
			return
		}
		if contiguous {
			seen.through = raw.Sequence
			delete(seen.ended, raw.Sequence)
			return
		}
		seen.ended[raw.Sequence] = struct{}{}
	})
}

// undelivered returns the first stream sequence persona's consumer has not
// delivered; false when nothing waits undelivered or the consumer cannot
// be read.
func (q *queueWaitRule) undelivered(ctx context.Context, persona string) (uint64, bool) {
	c, err := q.r.js.Consumer(ctx, q.r.topo.RequestsStream, Durable(persona))
	if err != nil {
		q.r.log.Debug().Err(err).Str("persona", persona).Msg("queue-wait scan: consumer not read")
		return 0, false
	}
	info := c.CachedInfo() // fresh: Consumer just read it
	return info.Delivered.Stream + 1, info.NumPending > 0
}

// open looks the requests stream up once.
func (q *queueWaitRule) open(ctx context.Context) bool {
	if q.stream != nil {
		return true
	}
	s, err := q.r.js.Stream(ctx, q.r.topo.RequestsStream)
	if err != nil {
		return false
	}
	q.stream = s
	return true
}

// seenOf returns what the rule knows of persona's requests, without the
// sequences below from (delivered since: their delivery settles them).
func (q *queueWaitRule) seenOf(persona string, from uint64) *queueWaitSeen {
	seen := q.by[persona]
	if seen == nil {
		seen = &queueWaitSeen{ended: map[uint64]struct{}{}}
		q.by[persona] = seen
	}
	for seq := range seen.ended {
		if seq < from {
			delete(seen.ended, seq)
		}
	}
	return seen
}

// endIfWaited ends the request in raw when its queue wait had passed at
// now. It reports whether raw needs no more reading: ended, or not a
// request of p (its delivery quarantines it).
func (q *queueWaitRule) endIfWaited(p *personaRuntime, raw *jetstream.RawStreamMsg, now time.Time) bool {
	req, err := schemas.DecodeRequest(raw.Data)
	if err != nil || req.Persona != p.name {
		return true
	}
	pol, err := q.r.policyFor(p, req)
	if err != nil {
		return true
	}
	waited, passed := queueWaitPassed(*pol, req, now)
	if !passed {
		return false
	}
	st := q.waitingState(p, raw, req)
	st.policy = pol
	_, err = q.r.endQueueWait(st, waited)
	return err == nil
}

// waitingState is what endQueueWait needs of a request read where it
// waits, as decode would have set it on delivery.
func (q *queueWaitRule) waitingState(p *personaRuntime, raw *jetstream.RawStreamMsg, req *schemas.PersonaRequest) *attemptState {
	corrID := req.CorrelationID
	if corrID == "" {
		corrID = raw.Header.Get(schemas.HeaderCorrelationID)
	}
	if corrID == "" {
		corrID = req.RequestID
	}
	return &attemptState{
		persona: p, started: q.r.now(), req: req, corrID: corrID,
		delivery: &transport.Delivery{Stream: q.r.topo.RequestsStream, Subject: raw.Subject, Sequence: raw.Sequence, Published: raw.Time},
		log: fixedLog(q.r.log.With().Str("persona", p.name).Uint64("stream_seq", raw.Sequence).Str("task_id", req.TaskID).
			Str("step", req.Step).Str("correlation_id", corrID).Str("ended_by", "queue_wait_scan").Logger()),
	}
}
