package consumers

import (
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"runtime/debug"
	"strconv"
	"time"

	"github.com/personaq/personaq/consumers/ledger"
	"github.com/personaq/personaq/consumers/rdb"
	"github.com/personaq/personaq/consumers/transport"
	"github.com/personaq/personaq/dlq"
	"github.com/personaq/personaq/retry"
	"github.com/personaq/personaq/schemas"
)

// begin is the stage that numbers the attempt: from the ledger (not from
// JetStream deliveries), under a lease. It ends the delivery without
// running the handler when the request already ended (its terminal or
// quarantine record exists, or its last recorded attempt ended it), when
// its attempts are spent, or when it runs elsewhere under a live lease.
// A ledger that cannot be reached holds the delivery until it can
// (awaitLedger): a Redis outage burns no attempt and no delivery.
func (r *Runtime) begin(ctx context.Context, st *attemptState) (ending, bool) {
	// The successor of a delivery this replica retried skips the lookups
	// (ownRetries says why), unless the ledger turns out to know nothing.
	own := st.delivery.Delivered > 1 && r.retried.take(st.delivery, r.now())
	if !own {
		if end, done := r.endedEarlier(ctx, st); done {
			return end, true
		}
	}
	if r.ledger == nil {
		st.attempt.Number = int(st.delivery.Delivered)
		return ending{}, false
	}
	begun, end, done := r.beginLeased(ctx, st)
	if done {
		return end, true
	}
	if end, done := r.endedUnknown(ctx, st, begun, own); done {
		return end, true
	}
	st.history, st.attempt.Number = begun.History, begun.Attempt
	if end, done := r.endedBefore(st); done {
		return end, true
	}
	if begun.Attempt > st.policy.MaxAttempts {
		return r.spent(st), true
	}
	r.startOnTime(ctx, st)
	return ending{}, false
}

// endedEarlier catches a redelivery of a request an earlier delivery
// already ended: its terminal record exists (its worker died after writing
// it, or Redis lost the ledger), or its quarantine record does (stored
// before a crash). It is settled the way the record says, without running
// the handler again; the terminal record decides when both exist. Only
// redeliveries pay for the lookups, and the two are read at once: a burst
// of retries coming back waits one round trip each, not two.
func (r *Runtime) endedEarlier(ctx context.Context, st *attemptState) (ending, bool) {
	if st.delivery.Delivered < 2 {
		return ending{}, false
	}
	qctx, cancel := context.WithCancel(ctx)
	defer cancel()
	found := make(chan quarantineFound, 1)
	go func() {
		// A panic of the read is the delivery's, as when it ran inline:
		// raised again on its own goroutine, not the process's end.
		defer func() {
			if p := recover(); p != nil {
				found <- quarantineFound{panicked: fmt.Sprintf("quarantine record read: %v\n%s", p, debug.Stack())}
			}
		}()
		found <- r.quarantineLookup(qctx, st)
	}()
	end, done := r.settledByRecord(ctx, st)
	if done {
		cancel() // the terminal record decides: the other read is not needed
	}
	q := <-found
	if q.panicked != nil {
		panic(q.panicked)
	}
	if done {
		return end, true
	}
	return r.quarantinedBefore(st, q)
}

// endedUnknown catches what the ledger cannot tell a delivery because it
// lost the step (Fresh: wiped): a first delivery of a message older than
// the ledger's data, or a delivery that skipped endedEarlier's lookups, is
// settled by its records when it has them; the attempt Begin claimed is
// given back (completed work is not rerun after a wipe).
func (r *Runtime) endedUnknown(ctx context.Context, st *attemptState, begun ledger.Begun, own bool) (ending, bool) {
	var end ending
	var done bool
	switch {
	case !begun.Fresh:
		return ending{}, false
	case own:
		end, done = r.endedEarlier(ctx, st)
	case st.delivery.Delivered < 2 && r.wipedSince(st.delivery):
		end, done = r.settledByRecord(ctx, st)
	}
	if done {
		r.finishUncounted(st, begun.Attempt)
	}
	return end, done
}

// holdLease starts renewing the attempt's lease; cancel ends the attempt's
// context when the lease is lost.
func (r *Runtime) holdLease(st *attemptState, cancel context.CancelCauseFunc) {
	st.lease.cancel = cancel
	r.leases.add(st.lease)
}

// beginLeased calls Begin with the attempt's lease and, for a message older
// than the ledger's data, JetStream's delivery count as the attempt floor.
func (r *Runtime) beginLeased(ctx context.Context, st *attemptState) (ledger.Begun, ending, bool) {
	begunAt := time.Now()
	begun, err := r.callBegin(ctx, st)
	if err != nil && rdb.Unavailable(err) {
		var stop *ending
		if begun, stop = r.awaitLedger(ctx, st, err); stop != nil {
			return begun, *stop, true
		}
		begunAt, err = time.Now(), nil
	}
	if err == nil && begun.Busy && r.outwait(ctx, st, begun.BusyFor) {
		begunAt = time.Now()
		begun, err = r.callBegin(ctx, st)
	}
	switch {
	case err != nil:
		end := released(releaseDelay(st.delivery.Delivered))
		st.log.Warn().Err(err).Float64("backoffSeconds", end.delay.Seconds()).Msg("ledger call failed; message released without counting an attempt")
		return begun, end, true
	case begun.Done:
		return begun, r.alreadyDone(ctx, st), true
	case begun.Busy:
		end := released(begun.BusyFor + busyMargin)
		st.log.Info().Int("running_attempt", begun.BusyAttempt).Float64("backoffSeconds", end.delay.Seconds()).
			Msg("an attempt of this request runs elsewhere (live lease); released without counting an attempt")
		return begun, end, true
	}
	if begun.Resumed {
		st.log.Info().Int("attempt", begun.Attempt).
			Msg("attempt ledger had run this delivery's unanswered start: its attempt, which never ran, is resumed, not counted lost")
	}
	if begun.Fresh && r.floored(st.delivery) {
		st.log.Warn().Uint64("delivered", st.delivery.Delivered).Int("attempt", begun.Attempt).
			Msg("ledger lost this request's attempts; numbering from its JetStream delivery count")
	}
	st.lease = newAttemptLease(begun.Lease, leaseTTL(st.persona.spec.AckWait), begunAt, &st.log, begun.Attempt)
	return begun, ending{}, false
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

// callBegin begins the attempt under its lease. A redelivery also reads
// the ledger's epoch in the same round trip (the ledger may have been
// wiped since the periodic check last read it, every 2 s): when the
// ledger's data is younger than the message, its delivery count is the
// attempt floor, so no request exceeds its maximum attempts after a wipe
// (it may get fewer).
func (r *Runtime) callBegin(ctx context.Context, st *attemptState) (ledger.Begun, error) {
	t0 := time.Now()
	lctx, cancel := context.WithTimeout(ctx, ledgerTimeout)
	defer cancel()
	opts := []ledger.BeginOption{ledger.WithLease(leaseTTL(st.persona.spec.AckWait)), ledger.WithIdempotencyKey(r.beginKey(st.delivery))}
	if d := st.delivery; d.Delivered > 1 {
		opts = append(opts, ledger.WithEpochFloor(d.Published, int(d.Delivered)))
	}
	begun, err := r.ledger.Begin(lctx, stepKey(st.req), st.req.RequestID, opts...)
	r.obs.LedgerCall("begin", time.Since(t0), err)
	r.health.ledgerResult(err)
	if err == nil && !begun.Epoch.IsZero() {
		r.noteEpoch(begun.Epoch)
	}
	return begun, err
}

// beginKey is the idempotency key of d's Begin calls: this Runtime's
// random prefix, the message's stream sequence, its delivery count and
// when this Runtime received it, so unique to one delivery. A delivery
// asks Begin again only when it got no answer (awaitLedger) or found the
// step busy (outwait); when the unanswered call did open an attempt (Redis
// ran the script, then shut down before replying), the next call takes
// that attempt over: it never reached the handler, so it is not recorded
// as lost. The receipt time is there because the delivery count alone
// repeats: a nats-server killed and restarted on its store can deliver a
// message again under a count it had already used (its consumer state is
// flushed periodically), and a redelivery with its predecessor's key would
// take over an attempt that did run and is still settling, and run it again.
func (r *Runtime) beginKey(d *transport.Delivery) string {
	b := make([]byte, 0, len(r.beginKeys)+48)
	b = append(b, r.beginKeys...)
	b = strconv.AppendUint(b, d.Sequence, 10)
	b = append(b, '.')
	b = strconv.AppendUint(b, d.Delivered, 10)
	b = append(b, '.')
	b = strconv.AppendInt(b, d.Received.UnixNano(), 36)
	return string(b)
}

// newBeginKeys is a random prefix for a Runtime's Begin keys.
func newBeginKeys() string {
	b := make([]byte, 8)
	_, _ = crand.Read(b)
	return hex.EncodeToString(b) + "."
}

// floored reports whether d's attempt was numbered from its delivery
// count: a redelivery of a message older than the ledger's data.
func (r *Runtime) floored(d *transport.Delivery) bool {
	return d.Delivered > 1 && r.wipedSince(d)
}

// quarantineFound is what the quarantine record lookup of a redelivery
// found: rec is nil when there is none (or it could not be read).
type quarantineFound struct {
	rec      *schemas.QuarantineRecord
	seq      uint64
	panicked any // the read panicked with this
}

// quarantineLookup reads the quarantine record a previous delivery of st's
// message may have stored before crashing.
func (r *Runtime) quarantineLookup(ctx context.Context, st *attemptState) quarantineFound {
	rec, seq, err := r.dlq.Stored(ctx, dlq.RecordID(st.delivery.Stream, st.delivery.Sequence))
	if err != nil || rec == nil {
		return quarantineFound{}
	}
	return quarantineFound{rec: rec, seq: seq}
}

// quarantinedBefore catches a redelivery whose quarantine record a previous
// delivery stored before crashing (q, from quarantineLookup): it is termed
// (and its outcome published) without running the handler again.
func (r *Runtime) quarantinedBefore(st *attemptState, q quarantineFound) (ending, bool) {
	if q.rec == nil {
		return ending{}, false
	}
	st.log.Info().Uint64("quarantine_seq", q.seq).Str("reason", string(q.rec.Reason)).Msg("redelivery of a message already quarantined; terming it without running the handler")
	end := quarantined(retry.Decision{Action: retry.ActionQuarantine, Reason: q.rec.Reason})
	end.stored, end.storedSeq = q.rec, q.seq
	return end, true
}

// settledByRecord settles st the way the request's terminal record says,
// when it has one. A record that cannot be read because the cluster is
// between stream leaders releases the delivery instead of running it: the
// request may well have ended already.
func (r *Runtime) settledByRecord(ctx context.Context, st *attemptState) (ending, bool) {
	var final *schemas.OutcomeEvent
	err := patiently(ctx, settleTimeout, func(ctx context.Context) (err error) {
		final, err = r.outcomes.Lookup(ctx, st.req.RequestID)
		return err
	})
	switch {
	case errors.Is(err, ErrNoOutcome):
		return ending{}, false
	case transient(err):
		st.log.Warn().Err(err).Msg("terminal record not readable while the cluster fails over; released, not run")
		return released(faultDelay), true
	case err != nil:
		st.log.Warn().Err(err).Msg("terminal record lookup failed; running the attempt")
		return ending{}, false
	}
	st.log.Info().Str("outcome", string(final.Outcome)).Int("attempts", final.Attempts).
		Msg("redelivery of a request that already has its terminal record; settled without running the handler")
	return settledBy(final), true
}

// alreadyDone settles a delivery of a step the ledger says succeeded: the
// way its terminal record says, or, when none was stored (the record
// expired), with a succeeded record without output.
func (r *Runtime) alreadyDone(ctx context.Context, st *attemptState) ending {
	lctx, cancel := context.WithTimeout(ctx, settleTimeout)
	defer cancel()
	end := ending{verdict: verdictAck, duplicate: true}
	if final, err := r.outcomes.Lookup(lctx, st.req.RequestID); err == nil {
		end = settledBy(final)
	} else {
		st.attempt.Number = r.attemptsRecorded(ctx, st)
	}
	st.log.Info().Int("attempt", st.attempt.Number).Msg("duplicate delivery of a completed step; settled without running the handler")
	return end
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
func (r *Runtime) endedBefore(st *attemptState) (ending, bool) {
	n := len(st.history)
	if n == 0 || st.history[n-1].Error == ledger.LostAttemptError || !st.history[n-1].Class.Failed() {
		return ending{}, false
	}
	last := st.history[n-1]
	d := retry.Decide(retry.Input{Policy: *st.policy, HasFallback: st.hasFallback(), History: st.history[:n-1],
		Current: last, ProgressTotal: st.req.ProgressTotal})
	if d.Action == retry.ActionRetry || d.Action == retry.ActionAck {
		return ending{}, false
	}
	r.finishUncounted(st, st.attempt.Number)
	st.history, st.attempt = st.history[:n-1], last
	st.log.Warn().Int("attempt", last.Number).Str("reason", string(d.Reason)).
		Msg("redelivery of a request its last recorded attempt already ended; quarantined without running again")
	return quarantined(d), true
}

// spent ends a redelivery whose attempts are all used (its quarantine
// write failed last time): quarantined again without running the handler.
func (r *Runtime) spent(st *attemptState) ending {
	d := retry.Decision{Action: retry.ActionQuarantine, Reason: schemas.ReasonExhausted,
		Detail: fmt.Sprintf("all %d attempts already used", st.policy.MaxAttempts)}
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
	return quarantined(d)
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

// releaseDelay grows with deliveries so a long ledger outage does not spin.
func releaseDelay(delivered uint64) time.Duration {
	return min(time.Duration(delivered)*time.Second, 15*time.Second)
}
