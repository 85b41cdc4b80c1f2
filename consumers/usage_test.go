package consumers_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/personaq/personaq/consumers"
	"github.com/personaq/personaq/consumers/ledger"
	"github.com/personaq/personaq/handlers"
	"github.com/personaq/personaq/retry"
	"github.com/personaq/personaq/schemas"
)

// usageObserver sums the usage the runtime reports, by persona.
type usageObserver struct {
	countingObserver
	mu   sync.Mutex
	used map[string]retry.Usage
}

func (o *usageObserver) Usage(persona string, u retry.Usage) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.used == nil {
		o.used = map[string]retry.Usage{}
	}
	o.used[persona] = o.used[persona].Add(u)
}

func (o *usageObserver) of(persona string) retry.Usage {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.used[persona]
}

// paidFailure fails every attempt as retryable, each having used 400 input
// and 100 output tokens at $0.25, and counts its calls.
func paidFailure(n *atomic.Int32) handlers.Handler {
	return handlers.Func(func(_ context.Context, req *handlers.Request) (handlers.Result, error) {
		n.Add(1)
		return handlers.Result{Usage: retry.Usage{InputTokens: 400, OutputTokens: 100, CostUSD: 0.25}},
			handlers.Retryable(errors.New("the model answered nonsense"))
	})
}

// TestBudgetExhaustedEndsTheRequest: a persona whose attempts fail having
// used tokens ends budget_exhausted, a blocked task, as soon as another
// attempt would overspend its budget, not after its last attempt; the
// terminal record and the quarantine record sum the usage, the quarantine
// record keeps it per attempt, and the observer counted it. The budget
// comes from the policy or from the request, whichever is tighter.
func TestBudgetExhaustedEndsTheRequest(t *testing.T) {
	t.Parallel()
	h := newHarness(t, true)
	var logs syncBuffer
	h.logTo = &logs
	obs := &usageObserver{}
	var policyCalls, requestCalls atomic.Int32
	pol := fastPolicy(5)
	pol.UsageBudget = retry.UsageBudget{MaxTokens: 1200} // 500 + 500 fits, 1000 + 500 does not
	h.startMod(func(c *consumers.Config) { c.Observer = obs },
		persona("spender", paidFailure(&policyCalls), pol),
		persona("unbudgeted", paidFailure(&requestCalls), fastPolicy(5)))
	out := h.watchOutcomes()

	byPolicy := h.publish("spender", "t-budget-policy", func(r *schemas.PersonaRequest) {
		r.Budget = &schemas.Budget{MaxTokens: 1_000_000} // cannot loosen the policy's
	})
	byRequest := h.publish("unbudgeted", "t-budget-request", func(r *schemas.PersonaRequest) {
		r.Budget = &schemas.Budget{MaxCostUSD: 0.6} // $0.25 + $0.25 fits, $0.5 + $0.25 does not
	})
	for _, tc := range []struct {
		req   *schemas.PersonaRequest
		calls *atomic.Int32
	}{{byPolicy, &policyCalls}, {byRequest, &requestCalls}} {
		ev := out.wait(t, tc.req.RequestID, 30*time.Second)
		require.Equal(t, schemas.OutcomeQuarantined, ev.Outcome)
		require.Equal(t, schemas.ReasonBudgetExhausted, ev.Reason)
		require.True(t, ev.Blocked)
		require.Equal(t, 2, ev.Attempts)
		require.EqualValues(t, 2, tc.calls.Load(), "no attempt after the budget ran out")
		want := &schemas.Usage{InputTokens: 800, OutputTokens: 200, CostUSD: 0.5}
		require.Equal(t, want, ev.Usage)
		require.Contains(t, ev.Detail, "budget")

		rec := h.quarantined(ev.QuarantineSeq)
		require.Equal(t, schemas.ReasonBudgetExhausted, rec.Reason)
		require.Equal(t, want, rec.Usage)
		require.Len(t, rec.Errors, 2)
		for _, a := range rec.Errors {
			require.Equal(t, &schemas.Usage{InputTokens: 400, OutputTokens: 100, CostUSD: 0.25}, a.Usage)
		}
	}
	// The decision's log line says what was spent against which budget.
	var line map[string]any
	for _, l := range strings.Split(logs.String(), "\n") {
		if strings.Contains(l, `"reason":"budget_exhausted"`) && strings.Contains(l, `"persona":"spender"`) {
			require.NoError(t, json.Unmarshal([]byte(l), &line))
		}
	}
	require.NotNil(t, line, "no budget_exhausted line for spender in:\n%s", logs.String())
	for k, v := range map[string]any{
		"task_id": "t-budget-policy", "attempt": 2.0, "spent_tokens": 1000.0, "spent_input_tokens": 800.0,
		"spent_output_tokens": 200.0, "spent_cost_usd": 0.5, "budget_max_tokens": 1200.0, "blocked": true,
	} {
		require.Equal(t, v, line[k], k)
	}
	require.Contains(t, line["message"], "token or cost budget exhausted; task blocked")

	require.Equal(t, retry.Usage{InputTokens: 800, OutputTokens: 200, CostUSD: 0.5}, obs.of("spender"))
	require.Equal(t, retry.Usage{InputTokens: 800, OutputTokens: 200, CostUSD: 0.5}, obs.of("unbudgeted"))
}

// TestUsageSummedIntoASucceededRecord: a request that succeeds after a
// paid failure carries both attempts' usage in its terminal record, and
// the ledger keeps it per attempt.
func TestUsageSummedIntoASucceededRecord(t *testing.T) {
	t.Parallel()
	h := newHarness(t, true)
	h.start(persona("second-time", handlers.Func(func(_ context.Context, req *handlers.Request) (handlers.Result, error) {
		res := handlers.Result{Usage: retry.Usage{InputTokens: int64(100 * req.Attempt), OutputTokens: 10}}
		if req.Attempt == 1 {
			return res, handlers.Retryable(errors.New("try again"))
		}
		res.Output = []byte(`"ok"`)
		return res, nil
	}), fastPolicy(3)))
	out := h.watchOutcomes()
	req := h.publish("second-time", "t-usage-ok")
	ev := out.wait(t, req.RequestID, 30*time.Second)
	require.Equal(t, schemas.OutcomeSucceeded, ev.Outcome)
	require.Equal(t, &schemas.Usage{InputTokens: 300, OutputTokens: 20}, ev.Usage)

	hist, _, err := h.ledger.History(context.Background(), ledger.StepKey{TaskID: req.TaskID, Step: req.Step + "@" + req.RequestID})
	require.NoError(t, err)
	require.Len(t, hist, 2)
	require.Equal(t, retry.Usage{InputTokens: 100, OutputTokens: 10}, hist[0].Usage)
	require.Equal(t, retry.Usage{InputTokens: 200, OutputTokens: 10}, hist[1].Usage)
}
