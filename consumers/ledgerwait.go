package consumers

import (
	"context"
	"time"

	"github.com/personaq/personaq/consumers/ledger"
	"github.com/personaq/personaq/consumers/loop"
	"github.com/personaq/personaq/consumers/rdb"
	"github.com/personaq/personaq/schemas"
)

// One policy for an attempt ledger that cannot be reached, as for the
// rate limiter and the circuit store: work stops where it stands and
// resumes when Redis is back. No delivery is spent on the outage (every
// release would count toward MaxDeliver, and a long enough outage would
// quarantine waiting requests as max_deliveries):
//
//   - the pull gate (ledgerGate) pulls nothing while the ledger is down;
//   - a delivery whose Begin found it down is held, heartbeated, and asks
//     again every ledgerRetry (awaitLedger); a waiting caller is told
//     (attempt event "waiting", waiting_for attempt_ledger);
//   - a step deadline that passes meanwhile ends the request with
//     deadline_exceeded, saying the ledger was down; a shutdown releases
//     it at once to another replica.

// ledgerRetry is how often a delivery held through a ledger outage asks
// the ledger again.
const ledgerRetry = time.Second

// awaitLedger holds a delivery whose Begin found the ledger unreachable
// until a Begin answers. It returns what that Begin returned, or the
// ending of a delivery that stops waiting: its step deadline passed, the
// replica shuts down, or the ledger answered with another error.
func (r *Runtime) awaitLedger(ctx context.Context, st *attemptState, cause error) (ledger.Begun, *ending) {
	since := time.Now()
	r.ledgerWaiting(st, cause)
	for {
		wait := ledgerRetry
		if !st.deadline.IsZero() {
			wait = min(wait, st.deadline.Sub(r.now()))
		}
		if !loop.Sleep(ctx, wait) {
			end := released(0) // shutting down: to another replica at once
			return ledger.Begun{}, &end
		}
		if !st.deadline.IsZero() && !r.now().Before(st.deadline) {
			return ledger.Begun{}, r.ledgerDeadline(st, since, cause)
		}
		begun, err := r.callBegin(ctx, st)
		switch {
		case err == nil:
			st.log.Info().Dur("waited", time.Since(since)).Msg("attempt ledger reachable again; the held request goes on")
			return begun, nil
		case !rdb.Unavailable(err) || ctx.Err() != nil:
			end := released(releaseDelay(st.delivery.Delivered))
			st.log.Warn().Err(err).Float64("backoffSeconds", end.delay.Seconds()).Msg("ledger refused the attempt; message released without counting an attempt")
			return ledger.Begun{}, &end
		}
		cause = err
	}
}

// ledgerWaiting tells the caller and the log that st waits for the ledger.
func (r *Runtime) ledgerWaiting(st *attemptState, cause error) {
	if ok, held := r.quiet.Allow("ledger-wait/" + st.persona.name); ok {
		st.log.Warn().Err(cause).Int("held_back", held).Dur("retry_every", ledgerRetry).
			Msg("attempt ledger unreachable; request held (not released, no attempt counted) until it is back")
	}
	if r.cfg.NoAttemptEvents {
		return
	}
	ev := r.attemptEvent(st, schemas.AttemptWaiting)
	ev.WaitingFor, ev.Error = schemas.WaitingForLedger, cause.Error()
	r.publishAttempt(st, ev)
}

// ledgerDeadline ends a request whose step deadline passed while it
// waited for the ledger.
func (r *Runtime) ledgerDeadline(st *attemptState, since time.Time, cause error) *ending {
	st.log.Warn().Time("deadline", st.deadline).Dur("waited", time.Since(since)).Err(cause).
		Msg("Step deadline passed while the attempt ledger was unreachable; request ends without an attempt")
	end := quarantined(deadlineDecision(st.deadline, "passed while the attempt ledger (Redis) was unreachable (held "+
		time.Since(since).Round(time.Second).String()+", last error: "+cause.Error()+"); not run"))
	return &end
}
