package consumers

import (
	"context"
	"fmt"

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
// control, or by a ledger outage) from one whose attempt ran.
func (r *Runtime) queueWaited(ctx context.Context, st *attemptState) (ending, bool) {
	wait := st.policy.QueueWait
	if wait <= 0 || st.req.CreatedAt.IsZero() {
		return ending{}, false
	}
	waited := r.now().Sub(st.req.CreatedAt)
	if waited <= wait || (st.delivery.Delivered > 1 && r.startedBefore(ctx, st)) {
		return ending{}, false
	}
	end := ending{decision: retry.Decision{Action: retry.ActionQuarantine, Reason: schemas.ReasonQueueWaitExceeded,
		Detail: fmt.Sprintf("not started within its queue wait of %s (waited %s)", wait, waited.Round(1e6))}}
	st.attempt = retry.Attempt{}
	if err := r.conclude(st, &end, schemas.OutcomeDeadlineExceeded, 0); err != nil {
		return released(faultDelay), true
	}
	end.verdict = verdictSettled
	st.log.Warn().Str("request_id", st.req.RequestID).Dur("queue_wait", wait).Dur("waited", waited).
		Str("reason", string(schemas.ReasonQueueWaitExceeded)).Msg("request not started within its queue wait; ended without running")
	return end, true
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
