package consumers

import (
	"context"
	"errors"
	"time"

	"github.com/personaq/personaq/consumers/ledger"
	"github.com/personaq/personaq/consumers/transport"
	"github.com/personaq/personaq/schemas"
)

// Where a message's fate is carried out: this file. The stages before it
// (process.go) only decide how a delivery ends and return that ending;
// commit is the one sequence that acts on it, and the one place that
// writes a delivery's terminal record and settles its message.

// holdUnder is the longest retry delay this replica serves itself: the
// message is kept (heartbeated) and a plain Nak sent when it is due, since
// nats-server re-arms its redelivery timer on every nak and a NakWithDelay
// under a steady stream of naks comes back tens of ms to seconds late.
// Longer delays are a NakWithDelay: the server holds the message, and any
// replica may run the retry. (It configures the subscriber: router.)
const holdUnder = transport.DefaultHoldUnder

// ledgerTimeout bounds one ledger call, so a Redis outage is noticed
// within seconds (and the pull stopped) instead of every worker waiting
// while the client retries its connection.
const ledgerTimeout = 3 * time.Second

// commit carries out how a delivery ends, in this order:
//
//	effects   flow control hears of the attempt (circuit, token usage, a
//	          provider's throttling: the limiter's cool-down, which
//	          releases the attempt uncounted), metrics and events
//	ledger    a failed, retried or released attempt recorded, fenced by
//	          its lease (before anything of its ending is stored, so a
//	          crash after it is ended again from the ledger)
//	record    a quarantine's record (stored once, idempotently)
//	terminal  the request's terminal record: succeeded (with its output),
//	          quarantined, deferred, escalated or deadline_exceeded;
//	          create-once, an earlier one stands
//	ledger    a succeeded attempt recorded (after its record: a step the
//	          ledger calls done always has its answer)
//	settle    by the terminal record (Ack or Term), RetryAfter, Release,
//	          or Abandon when the lease or the claim was lost
//
// A write that fails releases the message (redelivered, never lost); a
// crash between any two steps leaves what a redelivery finds and settles
// without running the handler again. It returns the ending as carried out.
func (r *Runtime) commit(st *attemptState, end ending) ending {
	end = r.applyEffects(st, end)
	recordFirst := end.verdict == verdictAck
	if !recordFirst {
		end = r.finishAttempt(st, end)
	}
	end = r.storeQuarantine(st, end)
	end, _ = r.storeTerminal(st, end)
	if recordFirst {
		end = r.finishAttempt(st, end)
	}
	if end.verdict == verdictQuarantine && end.final != nil && r.crashed(st, stepConcluded) {
		end.verdict = verdictFenced
	}
	r.cancelledRetry(st, &end)
	r.settle(st, &end)
	return end
}

// applyEffects applies what decide returned as data: flow control's
// feedback and cool-down, the attempt's metrics and events, the record of
// a cancel that stopped it.
func (r *Runtime) applyEffects(st *attemptState, end ending) ending {
	fx := end.effects
	if fx.cancelled {
		return r.cancelRecord(st, end)
	}
	if !fx.ran {
		return end
	}
	if fx.throttled {
		if o, ok := r.obs.(FlowObserver); ok {
			o.ProviderThrottled(st.persona.name)
		}
	}
	if f := st.persona.flow; f != nil {
		f.settleTokens(st)
		f.outcome(st, fx.err)
	}
	if fx.coolDown {
		if rel, ok := st.persona.flow.throttled(st, fx.wait); ok {
			r.obs.Attempt(st.persona.name, st.attempt.Class, st.attempt.Duration)
			return rel
		}
		end = r.decided(st) // the limiter is out of reach: an ordinary retryable failure
		end.effects = fx
	}
	r.obs.Attempt(st.persona.name, st.attempt.Class, st.attempt.Duration)
	r.attemptFailed(st, end.decision)
	return end
}

// cancelRecord reports an attempt its request's cancel stopped and reads
// the cancelled record when the watch no longer knows it; unread, the
// message is released.
func (r *Runtime) cancelRecord(st *attemptState, end ending) ending {
	if end.final == nil {
		ctx, cancel := context.WithTimeout(context.Background(), settleTimeout)
		defer cancel()
		rec, err := r.outcomes.Lookup(ctx, st.req.RequestID)
		if err != nil {
			st.log.Warn().Err(err).Msg("cancelled attempt's record not read; released")
			return released(faultDelay)
		}
		end.final = rec
	}
	r.attemptCancelled(st)
	return end
}

// finishAttempt records an attempt that ran in the ledger, fenced by its
// lease: a stale holder's Finish writes nothing and its delivery settles
// nothing. An ending that settles nothing gives the lease up unrecorded.
func (r *Runtime) finishAttempt(st *attemptState, end ending) ending {
	if !st.invoked {
		return end
	}
	if r.ledger == nil || end.verdict == verdictFenced {
		r.leases.remove(st.lease)
		return end
	}
	st.lease.end()
	defer r.leases.remove(st.lease)
	counted := end.decision.Counted && end.verdict != verdictRelease
	opts := ledgerOptions(counted, end.verdict == verdictAck, st)
	t0 := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), ledgerTimeout)
	defer cancel()
	err := r.ledger.Finish(ctx, stepKey(st.req), st.attempt, opts)
	r.obs.LedgerCall("finish", time.Since(t0), err)
	switch {
	case errors.Is(err, ledger.ErrLeaseLost):
		st.lease.lose()
		r.refuseStale(st, "finish")
		return fenced
	case err != nil:
		r.health.ledgerResult(err)
		st.log.Warn().Err(err).Int("attempt", st.attempt.Number).Msg("ledger did not record the attempt; next delivery will count it as lost")
	}
	return end
}

// storeTerminal writes the request's terminal record when the ending has
// one to write — a success (or a duplicate of a step done whose record
// expired), a quarantine whose record is stored, a request whose queue
// wait passed — and sets end.final to the record that stands. It is the
// only caller of conclude. A record that cannot be stored releases the
// message (the error says why); a lease found lost settles nothing.
func (r *Runtime) storeTerminal(st *attemptState, end ending) (ending, error) {
	var outcome schemas.Outcome
	var qseq uint64
	switch {
	case end.final != nil:
		return end, nil
	case end.verdict == verdictAck:
		outcome = schemas.OutcomeSucceeded
	case end.verdict == verdictQuarantine && end.stored != nil:
		outcome, qseq = outcomeFor(end.stored.Reason), end.storedSeq
	case end.verdict == verdictSettled && end.outcome != "":
		outcome = end.outcome
	default:
		return end, nil
	}
	if end.verdict != verdictSettled && r.stale(st, "terminal record") {
		// A quarantine record stays: a redelivery finds it (quarantinedBefore).
		return fenced, transport.ErrLeaseLost
	}
	if err := r.conclude(st, &end, outcome, qseq); err != nil {
		return released(faultDelay), err
	}
	if end.verdict == verdictQuarantine && end.freshRecord && end.final.QuarantineSeq != qseq {
		ctx, cancel := context.WithTimeout(context.Background(), settleTimeout)
		defer cancel()
		r.withdrawRecord(ctx, st, end.final, qseq)
	}
	return end, nil
}

// settle is the last step and the only settle of a delivery's message:
// by its terminal record when it has one (Ack a success, Term anything
// else), else after its delay (RetryAfter, Release). Every settle is
// fenced first: a delivery whose attempt lost its lease, or whose claim on
// the message lapsed, settles nothing (stale settle refused).
func (r *Runtime) settle(st *attemptState, end *ending) {
	d := st.delivery
	op := end.settleOp()
	if end.verdict == verdictFenced || r.stale(st, op.String()) {
		end.verdict, end.settled = verdictFenced, settledNothing
		d.Abandon()
		return
	}
	var err error
	switch op {
	case settledAck:
		err = d.Ack()
	case settledTerm:
		err = d.Term(string(end.final.Reason))
	case settledRetry:
		err = r.retryAfter(st, end.delay)
	case settledRelease:
		err = d.Release(end.delay)
	default:
		st.log.Error().Int("verdict", int(end.verdict)).Msg("pipeline reached no verdict; message released")
		*end = released(faultDelay)
		op, err = settledRelease, d.Release(faultDelay)
	}
	end.settled = op
	if err != nil {
		st.log.Debug().Err(err).Msg("settle not confirmed") // the transport logged why
	}
}

// retryAfter gives the message back for its next attempt: after what is
// left of delay once the attempt's records are stored, since the delay runs
// from the attempt's end (waitLeft), less the retry's lead (retryLead). A retry this replica serves itself is
// remembered, so its next delivery, if it comes back here, starts without
// a redelivery's lookups (ownRetries).
func (r *Runtime) retryAfter(st *attemptState, delay time.Duration) error {
	if st.invoked {
		delay = waitLeft(delay, st.attempt.At.Add(st.attempt.Duration), r.now())
		delay -= r.retryLead(st, delay)
	}
	err := st.delivery.RetryAfter(delay)
	if err == nil && delay <= holdUnder && r.retriesSafe(st.delivery) {
		r.retried.note(st.delivery, delay, r.now())
	}
	return err
}

// waitLeft is what remains of a retry's delay at now for an attempt that
// ended at ended: the schedule's backoff (and a provider's Retry-After) is
// the time between one attempt's end and the next one's start, as the
// redelivery lateness metric measures it, so the time its ending took to be
// recorded (the ledger, the attempt's event; milliseconds, more under a
// burst of failures) is not added to it.
func waitLeft(delay time.Duration, ended, now time.Time) time.Duration {
	if ended.IsZero() {
		return delay
	}
	return min(max(delay-now.Sub(ended), 0), delay)
}

// settleOp is the settle the ending makes: by its terminal record when it
// has one, else after its delay.
func (e *ending) settleOp() settleOp {
	switch {
	case e.final != nil && e.final.Outcome == schemas.OutcomeSucceeded:
		return settledAck
	case e.final != nil:
		return settledTerm
	case e.verdict == verdictRetry:
		return settledRetry
	case e.verdict == verdictRelease:
		return settledRelease
	}
	return settledNothing
}

// String names the settle, for logs and counts of refused settles.
func (o settleOp) String() string {
	switch o {
	case settledAck:
		return "ack"
	case settledTerm:
		return "term"
	case settledRetry, settledRelease:
		return "nak"
	}
	return "settle"
}

// stale reports whether this delivery must not make the settle op: its
// attempt's lease, or its claim on the message, lapsed. A refused settle
// is logged and counted.
func (r *Runtime) stale(st *attemptState, op string) bool {
	if st.delivery.Held() && st.lease.valid(time.Now()) {
		return false
	}
	st.lease.lose()
	st.delivery.Fence()
	r.refuseStale(st, op)
	return true
}

// refuseStale logs and counts a settle refused to a stale holder.
func (r *Runtime) refuseStale(st *attemptState, op string) {
	st.log.Warn().Int("attempt", st.attempt.Number).Str("op", op).
		Msg("stale settle refused: this replica lost the attempt's lease; the request is left to its current holder")
	if o, ok := r.obs.(FenceObserver); ok {
		o.StaleSettle(st.persona.name, op)
	}
}
