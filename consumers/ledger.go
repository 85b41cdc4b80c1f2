package consumers

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"github.com/personaq/personaq/consumers/ledger"
	"github.com/personaq/personaq/retry"
	"github.com/personaq/personaq/schemas"
)

// Ledger counts a task step's attempts across replicas. *ledger.Ledger
// (Redis) implements it; with none, attempts are counted by JetStream
// deliveries and no history is kept (no plateau detection, no feedback).
type Ledger interface {
	Begin(ctx context.Context, key ledger.StepKey, requestID string) (ledger.Begun, error)
	Finish(ctx context.Context, key ledger.StepKey, a retry.Attempt, opts ledger.FinishOptions) error
	History(ctx context.Context, key ledger.StepKey) ([]retry.Attempt, ledger.State, error)
	Ping(ctx context.Context) error
}

// stepKey scopes the ledger entry to one request of a task step, so a
// replayed request (new request id) starts with a fresh attempt count.
func stepKey(req *schemas.PersonaRequest) ledger.StepKey {
	return ledger.StepKey{TaskID: req.TaskID, Step: req.Step + "@" + req.RequestID}
}

func finishOptions(st *attemptState) ledger.FinishOptions {
	counted := st.decision.Counted && st.verdict != verdictRelease
	return ledgerOptions(counted, st.verdict == verdictAck, st.req.RequestID)
}

func ledgerOptions(counted, succeeded bool, requestID string) ledger.FinishOptions {
	return ledger.FinishOptions{Counted: counted, Succeeded: succeeded, RequestID: requestID}
}

// watchLedger pings the ledger so readiness recovers (and degrades) even
// when no message arrives to notice.
func (r *Runtime) watchLedger(ctx context.Context, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			pctx, cancel := context.WithTimeout(ctx, every)
			r.health.ledgerResult(r.ledger.Ping(pctx))
			cancel()
		}
	}
}

// health tracks what readiness depends on.
type health struct {
	ledgerDown atomic.Bool
	bound      atomic.Bool
}

// ledgerResult records whether the last ledger call reached Redis. Our own
// per-call deadline running out counts as unreachable (a stopped server
// can outlast it); a cancellation (shutdown) says nothing either way.
func (h *health) ledgerResult(err error) {
	if errors.Is(err, context.Canceled) {
		return
	}
	h.ledgerDown.Store(errors.Is(err, ledger.ErrUnavailable) || errors.Is(err, context.DeadlineExceeded))
}
