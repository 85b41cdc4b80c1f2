package dlq

import (
	"fmt"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/personaq/personaq/schemas"
)

// replayDeadline decides the step deadline (schemas.HeaderDeadline) msg,
// the replay of a request, carries, and writes it in it. The original's
// deadline has most likely passed (a replay comes after someone fixed
// something; step budgets are minutes), and carrying it would end the
// replay as deadline_exceeded at once, unrun, replay after replay. So a
// replay gets a fresh step budget of the original's length (its deadline
// minus its created_at), from now; keep carries the original's instead.
// A budget that cannot be read (no created_at) is dropped: the replay runs
// under its retry policy alone.
func replayDeadline(msg *nats.Msg, payload []byte, keep bool, now time.Time, it *ReplayItem) {
	raw := msg.Header.Get(schemas.HeaderDeadline)
	if raw == "" {
		return
	}
	orig, err := time.Parse(time.RFC3339Nano, raw)
	if err != nil {
		return // the runtime quarantines a malformed deadline; kept as is
	}
	if keep {
		it.Deadline = orig.UTC()
		it.DeadlineNote = "original step deadline kept"
		if !now.Before(orig) {
			it.DeadlineNote += " — it has passed: the replay will end deadline_exceeded without running"
		}
		return
	}
	budget := stepBudget(payload, orig)
	if budget <= 0 {
		msg.Header.Del(schemas.HeaderDeadline)
		it.DeadlineNote = "original step deadline dropped (its budget is unknown): the replay runs under its retry policy alone"
		return
	}
	it.Deadline = now.Add(budget).UTC()
	msg.Header.Set(schemas.HeaderDeadline, it.Deadline.Format(time.RFC3339Nano))
	it.DeadlineNote = fmt.Sprintf("fresh step budget of %s (the original's), from the replay", budget.Round(time.Second))
}

// stepBudget is how long the request's caller gave its step: from its
// created_at to deadline (0 when unknown).
func stepBudget(payload []byte, deadline time.Time) time.Duration {
	req, err := schemas.DecodeRequest(payload)
	if err != nil || req.CreatedAt.IsZero() {
		return 0
	}
	return deadline.Sub(req.CreatedAt)
}
