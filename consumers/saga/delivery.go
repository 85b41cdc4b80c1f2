package saga

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/personaq/personaq/consumers/loop"
	"github.com/personaq/personaq/handlers"
	"github.com/personaq/personaq/retry"
	"github.com/personaq/personaq/schemas"
)

// laterDelay is when a request whose saga state or record could not be
// written comes back.
const laterDelay = 5 * time.Second

// settleTimeout bounds the writes that hand a request back after ctx ended.
const settleTimeout = 5 * time.Second

// handle is one delivery of a compensation request: at most one attempt,
// and exactly one settle of the message.
func (q *queue) handle(ctx context.Context, m *delivery) outcome {
	var seq, delivered uint64
	if md, err := m.Metadata(); err == nil {
		seq, delivered = md.Sequence.Stream, md.NumDelivered
	}
	req, err := schemas.DecodeCompensation(m.Data())
	if err != nil {
		return q.reject(ctx, m, seq, "compensation request could not be decoded: "+err.Error())
	}
	sg, err := q.load(ctx, m, req, seq)
	if err != nil {
		return q.later(m, req.SagaID, err)
	}
	switch onArrival(sg, req, m.Headers().Get(schemas.HeaderReplayOf) != "") {
	case arriveSettle:
		q.r.log.Info().Str("saga_id", sg.ID).Str("state", string(sg.State)).Msg("compensation request for a terminal saga settled without running")
		_ = m.ack(ctx)
		return outcome{}
	case arriveFinish:
		if err := q.writeRecord(ctx, sg); err != nil {
			return q.later(m, sg.ID, err)
		}
		_ = m.ack(ctx)
		return outcome{}
	case arriveReject:
		return q.reject(ctx, m, seq, fmt.Sprintf("saga %s already has a pending compensation %s %s; a saga carries one compensation, so %s %s was not taken in",
			sg.ID, sg.Kind, sg.Target, req.Kind, req.Target))
	case arriveReopen:
		if sg, err = q.reopen(ctx, sg, m, req, seq); err != nil {
			return q.later(m, req.SagaID, err)
		}
	}
	return q.attempt(ctx, m, sg, delivered)
}

// load reads the saga of req, recording it RUNNING when it is unknown (a
// request published without Publish).
func (q *queue) load(ctx context.Context, m *delivery, req *schemas.CompensationRequest, seq uint64) (*Saga, error) {
	sg, err := get(ctx, q.kv, req.SagaID)
	if !errors.Is(err, ErrNotFound) {
		return sg, err
	}
	sg = newSaga(req, m.Data(), m.Headers(), q.r.topo.Stream, seq, q.r.now())
	if _, err := q.kv.Create(ctx, sagaKey(req.SagaID), sg.encode()); err != nil && !errors.Is(err, jetstream.ErrKeyExists) {
		return nil, fmt.Errorf("record saga %s: %w", req.SagaID, err)
	}
	return get(ctx, q.kv, req.SagaID)
}

// reopen puts a QUARANTINED saga back to RUNNING for an operator's replay:
// a fresh start with the replayed request.
func (q *queue) reopen(ctx context.Context, cur *Saga, m *delivery, req *schemas.CompensationRequest, seq uint64) (*Saga, error) {
	next := newSaga(req, m.Data(), m.Headers(), q.r.topo.Stream, seq, q.r.now())
	next.Reopened, next.CreatedAt = cur.Reopened+1, cur.CreatedAt
	if err := update(ctx, q.kv, cur, next); err != nil {
		return nil, err
	}
	q.r.log.Info().Str("saga_id", cur.ID).Str("replay_of", m.Headers().Get(schemas.HeaderReplayOf)).Msg("quarantined saga reopened by an operator's replay")
	return next, nil
}

// attempt runs the saga's compensation once and settles the delivery.
func (q *queue) attempt(ctx context.Context, m *delivery, sg *Saga, delivered uint64) outcome {
	pol := q.r.policy(sg.Kind)
	n := attemptNumber(sg, delivered)
	h := q.r.cfg.Handlers[sg.Kind]
	switch {
	case h == nil || sg.Request == nil:
		return q.quarantine(ctx, m, sg, fmt.Errorf("%w for kind %s", ErrNoHandler, sg.Kind), sg.Attempts, nil)
	case n > pol.MaxAttempts:
		return q.quarantine(ctx, m, sg, errVanished, n-1, nil)
	}
	start := q.r.now()
	err := q.call(ctx, m, h, sg.Request, pol.AttemptTimeout)
	if err != nil && ctx.Err() != nil {
		q.release(ctx, m, sg, "compensation cut short; its request is handed back without counting an attempt")
		return outcome{}
	}
	// The handler ran: record its outcome even if ctx ended meanwhile.
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), settleTimeout)
	defer cancel()
	if err == nil {
		return q.compensated(sctx, m, sg, n)
	}
	return q.failed(sctx, m, sg, pol, retry.Attempt{Number: n, Error: err.Error(), Duration: q.r.now().Sub(start), At: start}, err)
}

// failed classifies a failed attempt a (its error err) and lets the retry
// policy decide on the saga's history: a retry, a snooze or the end.
func (q *queue) failed(ctx context.Context, m *delivery, sg *Saga, pol retry.Policy, a retry.Attempt, err error) outcome {
	c := handlers.Classify(err)
	a.Class, a.ErrorTypes, a.RetryAfter, a.Feedback = c.Class, c.TypeNames, c.RetryAfter, c.Feedback
	d := decide(pol, sg, a)
	switch {
	case d.Action == retry.ActionRetry && !d.Counted:
		q.release(ctx, m, sg, "compensation snoozed", d.Delay)
		return outcome{}
	case d.Action == retry.ActionRetry:
		return q.retry(ctx, m, sg, a, d)
	}
	rec := a.Record()
	return q.quarantine(ctx, m, sg, err, a.Number, &rec)
}

// call runs h under the attempt's timeout, telling the broker the request
// is in progress every third of AckWait so a long compensation keeps it.
func (q *queue) call(ctx context.Context, m *delivery, h Func, req *schemas.CompensationRequest, timeout time.Duration) error {
	actx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if m.wm == nil { // the transport's subscriber heartbeats its own deliveries
		var beat loop.Group // beats until h returns, even past its timeout or a shutdown
		beat.Start(context.WithoutCancel(ctx), func(ctx context.Context) { loop.Every(ctx, q.beat, func() { _ = m.raw.InProgress() }) })
		defer beat.Stop()
	}
	return safeCall(actx, h, req)
}

// safeCall runs h, turning a panic into a terminal error.
func safeCall(ctx context.Context, h Func, req *schemas.CompensationRequest) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = handlers.Terminal(fmt.Errorf("%w: %v", handlers.ErrPanic, p))
		}
	}()
	return h(ctx, req)
}

func (q *queue) compensated(ctx context.Context, m *delivery, sg *Saga, n int) outcome {
	next := *sg
	next.State, next.TerminalReason, next.Attempts, next.UpdatedAt = Compensated, "", n, q.r.now().UTC()
	if err := update(ctx, q.kv, sg, &next); err != nil {
		return q.later(m, sg.ID, err)
	}
	_ = m.ack(ctx)
	q.r.log.Info().Str("saga_id", sg.ID).Str("kind", string(sg.Kind)).Str("target", sg.Target).Int("attempts", n).Msg("saga compensated")
	return outcome{compensated: sg.ID}
}

// retry records the failed attempt and hands the request back to come
// again after the policy's delay.
func (q *queue) retry(ctx context.Context, m *delivery, sg *Saga, a retry.Attempt, d retry.Decision) outcome {
	next := *sg
	next.Attempts, next.UpdatedAt = a.Number, q.r.now().UTC()
	next.Errors = append(slices.Clone(sg.Errors), a.Record())
	if err := update(ctx, q.kv, sg, &next); err != nil {
		return q.later(m, sg.ID, err)
	}
	if err := m.nak(d.Delay); err != nil {
		q.r.log.Warn().Err(err).Str("saga_id", sg.ID).Msg("retry not scheduled; the request comes back after AckWait")
	}
	ev := q.r.log.Info()
	if d.Warning != "" {
		ev = q.r.log.Warn().Str("warning", d.Warning)
	}
	ev.Str("saga_id", sg.ID).Str("kind", string(sg.Kind)).Int("attempt", a.Number).Str("class", a.Class.String()).
		Float64("backoffSeconds", d.Delay.Seconds()).Str("error", a.Error).Msg("compensation failed; retry scheduled")
	return outcome{}
}

// quarantine ends the saga QUARANTINED (with the failed attempt rec, if it
// ran), writes its compensation_failed record, then settles the request.
func (q *queue) quarantine(ctx context.Context, m *delivery, sg *Saga, cause error, attempts int, rec *schemas.AttemptRecord) outcome {
	next := *sg
	next.State, next.Attempts, next.QuarantineSeq, next.UpdatedAt = Quarantined, attempts, 0, q.r.now().UTC()
	next.TerminalReason = terminalReason(sg, cause, attempts)
	if rec != nil {
		next.Errors = append(slices.Clone(sg.Errors), *rec)
	}
	if err := update(ctx, q.kv, sg, &next); err != nil {
		return q.later(m, sg.ID, err)
	}
	q.r.log.Warn().Str("saga_id", sg.ID).Str("kind", string(sg.Kind)).Str("target", sg.Target).Int("attempts", attempts).
		Str("terminal_reason", next.TerminalReason).Msg("saga quarantined: compensation failed")
	entry := fmt.Sprintf("saga %s: %s", sg.ID, next.TerminalReason)
	if err := q.writeRecord(ctx, &next); err != nil {
		q.later(m, sg.ID, err)
		return outcome{failure: entry + fmt.Sprintf(" (quarantine record not written yet, retried on redelivery: %v)", err)}
	}
	if err := m.ack(ctx); err != nil {
		q.r.log.Warn().Err(err).Str("saga_id", sg.ID).Msg("compensation request not settled; its redelivery is settled without running")
	}
	return outcome{failure: entry}
}

// release hands the request back without counting an attempt (the saga
// notes the delivery as released), after delay when one is given.
func (q *queue) release(ctx context.Context, m *delivery, sg *Saga, msg string, delay ...time.Duration) {
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), settleTimeout)
	defer cancel()
	next := *sg
	next.Released++
	if err := update(wctx, q.kv, sg, &next); err != nil {
		q.r.log.Warn().Err(err).Str("saga_id", sg.ID).Msg("released delivery not noted; it counts as an attempt")
	}
	if len(delay) > 0 {
		_ = m.nak(delay[0])
	} else {
		_ = m.nak(0)
	}
	q.r.log.Info().Str("saga_id", sg.ID).Msg(msg)
}

// later hands the request back to come again after laterDelay: what this
// delivery did was not recorded (a saga write failed or raced).
func (q *queue) later(m *delivery, id string, err error) outcome {
	q.r.log.Warn().Err(err).Str("saga_id", id).Float64("backoffSeconds", laterDelay.Seconds()).Msg("saga state not recorded; the request comes back")
	_ = m.nak(laterDelay)
	return outcome{}
}
