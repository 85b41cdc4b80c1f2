package consumers

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/personaq/personaq/consumers/ledger"
	"github.com/personaq/personaq/consumers/tracing"
	"github.com/personaq/personaq/consumers/transport"
	"github.com/personaq/personaq/dlq"
	"github.com/personaq/personaq/handlers"
	"github.com/personaq/personaq/retry"
	"github.com/personaq/personaq/schemas"
)

// ledgerMiddleware numbers the attempt from the ledger (not from JetStream
// deliveries), skips steps already done, and records the attempt after the
// decision. A ledger outage releases the message without burning an attempt.
// The attempt holds a lease while it runs; if the lease is lost, the attempt
// is cancelled and its delivery settles nothing (no record, no Finish).
func (r *Runtime) ledgerMiddleware(next message.HandlerFunc) message.HandlerFunc {
	return func(msg *message.Message) ([]*message.Message, error) {
		st := stateOf(msg)
		if r.ledger == nil {
			if r.concludedBefore(msg.Context(), st) || r.quarantinedBefore(msg.Context(), st) {
				return nil, nil
			}
			st.attempt.Number = int(st.delivery.Delivered)
			return next(msg)
		}
		if !r.begin(msg, st) {
			return nil, nil
		}
		out, err := next(msg)
		if st.verdict == verdictFenced {
			r.leases.remove(st.lease)
			return out, err
		}
		r.concludeSuccess(st)
		r.finish(st)
		return out, err
	}
}

// begin claims the attempt number and its lease; false means the verdict
// is already set.
func (r *Runtime) begin(msg *message.Message, st *attemptState) bool {
	ctx := msg.Context()
	if r.concludedBefore(ctx, st) || r.quarantinedBefore(ctx, st) {
		return false
	}
	begun, ok := r.beginLeased(ctx, st)
	if !ok {
		return false
	}
	if begun.Fresh && st.delivery.Delivered < 2 && r.wipedSince(st.delivery) && r.settledByRecord(ctx, st) {
		r.finishUncounted(st, begun.Attempt) // completed work is not rerun after a wipe
		return false
	}
	st.history, st.attempt.Number = begun.History, begun.Attempt
	if late, ok := lateness(st.policy, st.hasFallback(), st.history, st.delivery.Received); ok {
		r.obs.RedeliveryLateness(st.persona.name, late)
	}
	if r.endedBefore(st) {
		return false
	}
	if begun.Attempt > st.policy.MaxAttempts {
		r.spent(st)
		return false
	}
	lctx, cancel := context.WithCancelCause(ctx)
	msg.SetContext(lctx)
	st.lease.cancel = cancel
	r.leases.add(st.lease)
	return true
}

// beginLeased calls Begin with the attempt's lease and, for a message older
// than the ledger's data, JetStream's delivery count as the attempt floor.
func (r *Runtime) beginLeased(ctx context.Context, st *attemptState) (ledger.Begun, bool) {
	if st.delivery.Delivered > 1 {
		// The ledger may have been wiped since the periodic check last read
		// its epoch (every 2 s): read it before Begin, while the step the
		// wipe emptied is still fresh and takes the floor. One round trip,
		// on redeliveries only; an error here fails Begin too.
		_ = r.refreshEpoch(ctx)
	}
	begun, err := r.callBegin(ctx, st, r.floor(st.delivery))
	if err == nil && begun.Busy && r.outwait(ctx, st, begun.BusyFor) {
		begun, err = r.callBegin(ctx, st, r.floor(st.delivery))
	}
	switch {
	case err != nil:
		st.verdict, st.delay = verdictRelease, releaseDelay(st.delivery.Delivered)
		st.log.Warn().Err(err).Dur("release_in", st.delay).Msg("ledger unavailable; message released without counting an attempt")
		return begun, false
	case begun.Done:
		r.alreadyDone(ctx, st)
		return begun, false
	case begun.Busy:
		st.verdict, st.delay = verdictRelease, begun.BusyFor+busyMargin
		st.log.Info().Int("running_attempt", begun.BusyAttempt).Dur("release_in", st.delay).
			Msg("an attempt of this request runs elsewhere (live lease); released without counting an attempt")
		return begun, false
	}
	if begun.Fresh && r.floor(st.delivery) > 1 {
		st.log.Warn().Uint64("delivered", st.delivery.Delivered).Int("attempt", begun.Attempt).
			Msg("ledger lost this request's attempts; numbering from its JetStream delivery count")
	}
	st.lease = newAttemptLease(begun.Lease, leaseTTL(st.persona.spec.AckWait), st.begunAt, st.log.With().Int("attempt", begun.Attempt).Logger())
	return begun, true
}

// outwaitMax is the longest a redelivery waits, holding its message, for
// the lease of an attempt whose worker stopped renewing it to run out.
const outwaitMax = time.Second

// outwait waits out a lease about to expire that a redelivery found: the
// server redelivers a message AckWait after its last heartbeat, and the
// dead worker's last lease renewal may have come a little later, so the
// redelivery finds a lease with a few milliseconds left. Releasing it would
// spend a delivery (MaxDeliver counts them all) without running an attempt;
// waiting a moment keeps it. It reports whether it waited (then Begin is
// asked again: a live holder will have renewed its lease).
func (r *Runtime) outwait(ctx context.Context, st *attemptState, left time.Duration) bool {
	if st.delivery.Delivered < 2 || left > outwaitMax {
		return false
	}
	t := time.NewTimer(left + busyMargin)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		st.log.Info().Dur("waited", left+busyMargin).Msg("a lease about to expire held this request; waited it out")
		return true
	}
}

// busyMargin is added to the lease time left when a delivery finds its
// request running elsewhere, so it comes back after the lease, not at it.
const busyMargin = 250 * time.Millisecond

func (r *Runtime) callBegin(ctx context.Context, st *attemptState, floor int) (ledger.Begun, error) {
	t0 := time.Now()
	st.begunAt = t0
	lctx, cancel := context.WithTimeout(ctx, ledgerTimeout)
	defer cancel()
	begun, err := r.ledger.Begin(lctx, stepKey(st.req), st.req.RequestID,
		ledger.WithLease(leaseTTL(st.persona.spec.AckWait)), ledger.WithFloor(floor))
	r.obs.LedgerCall("begin", time.Since(t0), err)
	r.health.ledgerResult(err)
	return begun, err
}

// floor is the attempt floor of d: its delivery count when the ledger's
// data is younger than the message (no request exceeds its maximum
// attempts after a wipe; it may get fewer), else none.
func (r *Runtime) floor(d *transport.Delivery) int {
	if d.Delivered > 1 && r.wipedSince(d) {
		return int(d.Delivered)
	}
	return 0
}

// quarantinedBefore catches a redelivery whose quarantine record a previous
// delivery stored before crashing: it is termed (and its outcome published)
// without running the handler again. Only redeliveries pay for the lookup.
func (r *Runtime) quarantinedBefore(ctx context.Context, st *attemptState) bool {
	if st.delivery.Delivered < 2 {
		return false
	}
	rec, seq, err := r.dlq.Stored(ctx, dlq.RecordID(st.delivery.Stream, st.delivery.Sequence))
	if err != nil || rec == nil {
		return false
	}
	st.stored, st.storedSeq, st.verdict = rec, seq, verdictQuarantine
	st.decision.Reason = rec.Reason
	st.log.Info().Uint64("quarantine_seq", seq).Str("reason", string(rec.Reason)).Msg("redelivery of a message already quarantined; terming it without running the handler")
	return true
}

// alreadyDone settles a delivery of a step the ledger says succeeded: the
// way its terminal record says, or, when none was stored (the record
// expired), with a succeeded record without output.
func (r *Runtime) alreadyDone(ctx context.Context, st *attemptState) {
	lctx, cancel := context.WithTimeout(ctx, settleTimeout)
	defer cancel()
	if final, err := r.outcomes.Lookup(lctx, st.req.RequestID); err == nil {
		st.final, st.verdict = final, verdictSettled
	} else {
		st.verdict, st.duplicate = verdictAck, true
		st.attempt.Number = r.attemptsRecorded(ctx, st)
	}
	st.log.Info().Int("attempt", st.attempt.Number).Msg("duplicate delivery of a completed step; settled without running the handler")
}

// concludeSuccess stores a succeeded request's terminal record (with its
// output) before the ledger marks the step done, so "done" always has its
// answer; if the record cannot be stored the attempt is released uncounted.
func (r *Runtime) concludeSuccess(st *attemptState) {
	if st.verdict != verdictAck || st.final != nil || st.duplicate {
		return
	}
	if r.stale(st, "terminal record") {
		return
	}
	if err := r.conclude(st, schemas.OutcomeSucceeded, 0); err != nil {
		st.verdict, st.delay = verdictRelease, faultDelay
		st.decision.Counted = false
	}
}

// attemptsRecorded reads how many attempts a completed step took, for the
// outcome event republished on a duplicate delivery.
func (r *Runtime) attemptsRecorded(ctx context.Context, st *attemptState) int {
	hist, _, err := r.ledger.History(ctx, stepKey(st.req))
	if err != nil {
		return 0
	}
	return len(hist)
}

// endedBefore catches a redelivery whose last recorded attempt already
// ended the request (terminal, exhausted, deferred, escalated) though
// nothing of that ending was stored: its worker died between recording the
// attempt and writing the quarantine record. The decision is made again
// from the ledger (Decide is pure) and the request quarantined without
// running the handler; the attempt just claimed is given back.
func (r *Runtime) endedBefore(st *attemptState) bool {
	n := len(st.history)
	if n == 0 || st.history[n-1].Error == ledger.LostAttemptError || !st.history[n-1].Class.Failed() {
		return false
	}
	last := st.history[n-1]
	d := retry.Decide(retry.Input{Policy: st.policy, HasFallback: st.hasFallback(), History: st.history[:n-1],
		Current: last, ProgressTotal: st.req.ProgressTotal})
	if d.Action == retry.ActionRetry || d.Action == retry.ActionAck {
		return false
	}
	r.finishUncounted(st, st.attempt.Number)
	st.history, st.attempt, st.decision, st.verdict = st.history[:n-1], last, d, verdictQuarantine
	st.log.Warn().Int("attempt", last.Number).Str("reason", string(d.Reason)).
		Msg("redelivery of a request its last recorded attempt already ended; quarantined without running again")
	return true
}

// spent handles a redelivery whose attempts are all used (its quarantine
// write failed last time): quarantine again without running the handler.
func (r *Runtime) spent(st *attemptState) {
	st.decision = retry.Decision{Action: retry.ActionQuarantine, Reason: schemas.ReasonExhausted,
		Detail: fmt.Sprintf("all %d attempts already used", st.policy.MaxAttempts)}
	st.verdict = verdictQuarantine
	claimed := st.attempt.Number
	r.finishUncounted(st, claimed)
	// The event and log say how many attempts ran (the claimed number did
	// not run; after a wiped ledger it may overstate, so cap it).
	st.attempt = retry.Attempt{Number: min(claimed-1, st.policy.MaxAttempts)}
	if n := len(st.history); n > 0 {
		st.attempt.Error = st.history[n-1].Error
	}
	st.log.Error().Int("attempt", st.attempt.Number).Int("max_attempts", st.policy.MaxAttempts).
		Str("reason", string(schemas.ReasonExhausted)).Str("last_error", st.attempt.Error).
		Msg("All retries exhausted; task blocked, request quarantined without running again")
}

// finish records the attempt, fenced by its lease: a stale holder's Finish
// writes nothing and its delivery settles nothing.
func (r *Runtime) finish(st *attemptState) {
	st.lease.end()
	defer r.leases.remove(st.lease)
	opts := finishOptions(st)
	t0 := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), ledgerTimeout)
	defer cancel()
	err := r.ledger.Finish(ctx, stepKey(st.req), st.attempt, opts)
	r.obs.LedgerCall("finish", time.Since(t0), err)
	switch {
	case errors.Is(err, ledger.ErrLeaseLost):
		st.lease.lose()
		r.refuseStale(st, "finish")
	case err != nil:
		r.health.ledgerResult(err)
		st.log.Warn().Err(err).Int("attempt", st.attempt.Number).Msg("ledger did not record the attempt; next delivery will count it as lost")
	}
}

// finishUncounted gives back attempt number n, claimed by Begin but not run.
func (r *Runtime) finishUncounted(st *attemptState, n int) {
	st.lease.end()
	defer r.leases.remove(st.lease)
	a := retry.Attempt{Number: n, Class: retry.ClassSnooze, At: r.now()}
	ctx, cancel := context.WithTimeout(context.Background(), ledgerTimeout)
	defer cancel()
	if err := r.ledger.Finish(ctx, stepKey(st.req), a, ledgerOptions(false, false, st)); err != nil {
		st.log.Warn().Err(err).Msg("ledger did not release the attempt")
	}
}

// ledgerTimeout bounds one ledger call, so a Redis outage releases work
// within seconds instead of holding every worker slot while the client
// retries its connection.
const ledgerTimeout = 3 * time.Second

// releaseDelay grows with deliveries so a long ledger outage does not spin.
func releaseDelay(delivered uint64) time.Duration {
	return min(time.Duration(delivered)*time.Second, 15*time.Second)
}

// decideMiddleware runs the attempt under its timeout, classifies the
// outcome and asks retry.Decide what happens next.
func (r *Runtime) decideMiddleware(next message.HandlerFunc) message.HandlerFunc {
	return func(msg *message.Message) ([]*message.Message, error) {
		st := stateOf(msg)
		st.attempt.Role = retry.RoleFor(st.attempt.Number, st.hasFallback())
		st.attempt.Agent = st.agentFor(st.attempt.Role)
		timeout := retry.TimeoutFor(st.policy, st.history, st.attempt.Number)
		if !st.deadline.IsZero() {
			timeout = min(timeout, st.deadline.Sub(r.now())) // the caller stops waiting then
		}
		ctx, cancel := context.WithTimeout(msg.Context(), timeout)
		defer cancel()
		st.attempt.At = r.now()
		st.attempt.Trace = tracing.Traceparent(ctx)
		st.ctx = ctx
		r.attemptStarted(st)
		if _, err := next(msg); err != nil {
			return nil, err
		}
		st.attempt.Duration = r.now().Sub(st.attempt.At)
		if r.leaseLost(msg.Context(), st) || r.shuttingDown(msg.Context(), st) {
			return nil, nil
		}
		r.classify(st, ctx)
		if r.afterAttempt(st) {
			return nil, nil
		}
		r.obs.Attempt(st.persona.name, st.attempt.Class, st.attempt.Duration)
		st.decision = retry.Decide(retry.Input{Policy: st.policy, HasFallback: st.hasFallback(), History: st.history,
			Current: st.attempt, ProgressTotal: st.req.ProgressTotal})
		r.checkDeadline(st)
		r.toVerdict(st)
		r.attemptFailed(st)
		return nil, nil
	}
}

// leaseLost abandons an attempt whose lease (or claim on its message) was
// lost while it ran: it was cancelled, another replica may run the request
// now, and this delivery settles nothing.
func (r *Runtime) leaseLost(msgCtx context.Context, st *attemptState) bool {
	if !errors.Is(context.Cause(msgCtx), transport.ErrLeaseLost) && !st.lease.isLost() && !st.delivery.Lost() {
		return false
	}
	st.verdict = verdictFenced
	st.log.Warn().Int("attempt", st.attempt.Number).Dur("duration", st.attempt.Duration).
		Msg("attempt abandoned: its lease was lost; nothing is settled or recorded")
	return true
}

// shuttingDown releases an attempt cut short by a graceful shutdown: it is
// not the handler's failure, so it is not counted (STYLE lesson 7).
func (r *Runtime) shuttingDown(msgCtx context.Context, st *attemptState) bool {
	if st.err == nil || !errors.Is(context.Cause(msgCtx), transport.ErrShuttingDown) {
		return false
	}
	st.verdict, st.delay = verdictRelease, 0
	st.decision = retry.Decision{Action: retry.ActionRetry, Counted: false}
	st.attempt.Class = retry.ClassSnooze
	st.log.Info().Int("attempt", st.attempt.Number).Msg("attempt interrupted by shutdown; released without counting it")
	return true
}

// classify fills the attempt's outcome from the handler's result and error.
func (r *Runtime) classify(st *attemptState, attemptCtx context.Context) {
	c := handlers.Classify(st.err)
	if st.err != nil && errors.Is(attemptCtx.Err(), context.DeadlineExceeded) && c.Class == retry.ClassRetryable {
		c.Class = retry.ClassTimeout // the handler overran and returned something else
	}
	a := &st.attempt
	a.Class, a.ErrorTypes, a.RetryAfter, a.Feedback = c.Class, c.TypeNames, c.RetryAfter, c.Feedback
	a.Progress = st.result.Progress
	a.Usage = st.result.Usage
	if st.err != nil {
		a.Error = st.err.Error()
		a.Output = string(st.result.Output) // what the persona answered (fed back to the next attempt); the ledger bounds it
	}
}

// invoke is the innermost handler: it runs the persona's handler for one
// attempt and recovers a panic as a terminal outcome.
func (r *Runtime) invoke(msg *message.Message) error {
	st := stateOf(msg)
	defer func() {
		if p := recover(); p != nil {
			st.err = handlers.Terminal(fmt.Errorf("%w: %v", handlers.ErrPanic, p))
			st.log.Error().Interface("panic", p).Bytes("stack", debug.Stack()).Int("attempt", st.attempt.Number).Msg("persona handler panicked; treated as terminal")
		}
	}()
	req := &handlers.Request{
		Message: st.req, Attempt: st.attempt.Number, Role: st.attempt.Role, Agent: st.attempt.Agent,
		Previous: st.history, Feedback: retry.FeedbackFor(st.history),
		ProgressInterval: retry.ProgressIntervalFor(st.policy, st.history),
	}
	r.obs.InFlight(st.persona.name, 1)
	defer r.obs.InFlight(st.persona.name, -1)
	st.result, st.err = st.persona.handler.Handle(st.ctx, req)
	r.observeUsage(st)
	return nil
}
