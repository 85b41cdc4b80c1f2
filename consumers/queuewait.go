package consumers

import (
	"context"
	"fmt"
	"time"

	"github.com/personaq/personaq/retry"
	"github.com/personaq/personaq/schemas"
)

// queueWaited is the stage after cancel: a request its policy gives a
// queue wait (retry.Policy.QueueWait, per persona, preset or request) and
// that did not start within it ends unrun, before flow control can hold it
// longer: its terminal record (deadline_exceeded, reason
// queue_wait_exceeded) is written create-once and the message termed. It
// costs nothing until the wait has passed; then a redelivery reads the
// ledger's history once to tell a request never started (released by flow
// control, or by a ledger outage) from one whose attempt ran. A request
// that waits undelivered (behind busy worker slots, or an open circuit's
// paused consumer) is ended on time by the queue-wait scan (waitscan.go);
// its delivery then finds that record and is settled by it, unrun.
func (r *Runtime) queueWaited(ctx context.Context, st *attemptState) (ending, bool) {
	if st.policy.QueueWait > 0 && !st.persona.queueWaits.Load() {
		st.persona.queueWaits.Store(true) // the scan now reads this persona's waiting requests
	}
	waited, passed := queueWaitPassed(*st.policy, st.req, r.now())
	if !passed || (st.delivery.Delivered > 1 && r.startedBefore(ctx, st)) {
		return ending{}, false
	}
	return r.queueWaitEnding(st, waited), true
}

// queueWaitPassed reports how long req has waited at now (from its
// created_at) and whether that is past pol's queue wait (false when it has
// none).
func queueWaitPassed(pol retry.Policy, req *schemas.PersonaRequest, now time.Time) (time.Duration, bool) {
	if pol.QueueWait <= 0 || req.CreatedAt.IsZero() {
		return 0, false
	}
	waited := now.Sub(req.CreatedAt)
	return waited, waited > pol.QueueWait
}

// queueWaitEnding ends st's request, which did not start within its
// queue wait: commit writes its terminal record (deadline_exceeded, reason
// queue_wait_exceeded; create-once) and settles its message by the record
// that stands.
func (r *Runtime) queueWaitEnding(st *attemptState, waited time.Duration) ending {
	wait := st.policy.QueueWait
	st.attempt = retry.Attempt{}
	st.log.Warn().Str("request_id", st.req.RequestID).Dur("queue_wait", wait).Dur("waited", waited).
		Str("reason", string(schemas.ReasonQueueWaitExceeded)).Msg("request not started within its queue wait; ended without running")
	return ending{verdict: verdictSettled, outcome: schemas.OutcomeDeadlineExceeded,
		decision: retry.Decision{Action: retry.ActionQuarantine, Reason: schemas.ReasonQueueWaitExceeded,
			Detail: fmt.Sprintf("not started within its queue wait of %s (waited %s)", wait, waited.Round(time.Millisecond))}}
}

// endQueueWait writes the terminal record of st's request, which did not
// start within its queue wait, for the queue-wait scan (a request waiting
// undelivered), through commit's one writer.
func (r *Runtime) endQueueWait(st *attemptState, waited time.Duration) (ending, error) {
	return r.storeTerminal(st, r.queueWaitEnding(st, waited))
}

// startedBefore reports whether an attempt of st's request was recorded
// (without a ledger, or when it cannot be read, it assumes one was: a
// request is never ended as unstarted by guess).
func (r *Runtime) startedBefore(ctx context.Context, st *attemptState) bool {
	if r.ledger == nil {
		return true
	}
	lctx, cancel := context.WithTimeout(ctx, ledgerTimeout)
	defer cancel()
	hist, _, err := r.ledger.History(lctx, stepKey(st.req))
	return err != nil || len(hist) > 0
}
