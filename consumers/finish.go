package consumers

import (
	"context"
	"errors"
	"time"

	"github.com/personaq/personaq/consumers/ledger"
	"github.com/personaq/personaq/retry"
	"github.com/personaq/personaq/schemas"
)

// ledgerTimeout bounds one ledger call, so a Redis outage is noticed
// within seconds (and the pull stopped) instead of every worker waiting
// while the client retries its connection.
const ledgerTimeout = 3 * time.Second

// finish is the stage after decide: a success's terminal record is stored
// first (with its output), so a step the ledger calls done always has its
// answer; then the attempt is recorded in the ledger, fenced by its lease.
// A record that cannot be stored releases the attempt uncounted; a lease
// found lost settles nothing.
func (r *Runtime) finish(st *attemptState, end ending) ending {
	if end.verdict == verdictFenced {
		r.leases.remove(st.lease)
		return end
	}
	end = r.concludeSuccess(st, end)
	if r.ledger == nil || end.verdict == verdictFenced {
		r.leases.remove(st.lease)
		return end
	}
	return r.recordAttempt(st, end)
}

// concludeSuccess stores a succeeded request's terminal record; if it
// cannot be stored the attempt is released uncounted.
func (r *Runtime) concludeSuccess(st *attemptState, end ending) ending {
	if end.verdict != verdictAck || end.final != nil || end.duplicate {
		return end
	}
	if r.stale(st, "terminal record") {
		return fenced
	}
	if err := r.conclude(st, &end, schemas.OutcomeSucceeded, 0); err != nil {
		end.verdict, end.delay = verdictRelease, faultDelay
		end.decision.Counted = false
	}
	return end
}

// recordAttempt records the attempt in the ledger, fenced by its lease: a
// stale holder's Finish writes nothing and its delivery settles nothing.
func (r *Runtime) recordAttempt(st *attemptState, end ending) ending {
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
