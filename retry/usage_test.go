package retry_test

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/personaq/personaq/retry"
	"github.com/personaq/personaq/schemas"
)

// used is attempt n, failed, having used in+out tokens and cost dollars.
func used(n int, in, out int64, cost float64) retry.Attempt {
	a := at(n, failed, -1)
	a.Usage = retry.Usage{InputTokens: in, OutputTokens: out, CostUSD: cost}
	return a
}

// TestDecideUsageBudget walks requests whose failed attempts report usage
// against a token or cost budget: the request ends budget_exhausted (a
// blocked task) as soon as what was spent plus a next attempt as large as
// the largest so far would exceed a limit; never on the last attempt
// (exhausted says it better), never for attempts that report nothing.
func TestDecideUsageBudget(t *testing.T) {
	t.Parallel()
	p := retry.PersonaPolicy(time.Minute) // 4 attempts, linear 30s
	budget := func(tokens int64, usd float64) retry.Policy {
		q := p
		q.UsageBudget = retry.UsageBudget{MaxTokens: tokens, MaxCostUSD: usd}
		return q
	}
	over := final(retry.ActionQuarantine, schemas.ReasonBudgetExhausted)
	tests := map[string]struct {
		policy retry.Policy
		steps  []step
	}{
		"NoBudgetRetriesWhateverWasSpent": {p, []step{
			{used(1, 1e9, 1e9, 1e6), retryTo(2, primary, s30, time.Minute, 3)},
		}},
		"TokensStopBeforeTheAttemptThatWouldOverspend": {budget(1000, 0), []step{
			{used(1, 300, 100, 0), retryTo(2, primary, s30, time.Minute, 3)}, // 400 + 400 ≤ 1000
			{used(2, 300, 100, 0), over},                                     // 800 + 400 > 1000
		}},
		"ExactlyTheBudgetIsAllowed": {budget(1200, 0), []step{
			{used(1, 300, 100, 0), retryTo(2, primary, s30, time.Minute, 3)},
			{used(2, 300, 100, 0), retryTo(3, primary, s60, time.Minute, 2)}, // 800 + 400 = 1200
			{used(3, 300, 100, 0), over},
		}},
		"TheLargestAttemptIsTheProjection": {budget(1000, 0), []step{
			{used(1, 50, 50, 0), retryTo(2, primary, s30, time.Minute, 3)}, // 100 + 100 ≤ 1000
			{used(2, 400, 100, 0), over},                                   // 600 + 500 > 1000 (an average would allow it)
		}},
		"CostStopsWhenReported": {budget(0, 0.5), []step{
			{used(1, 10, 10, 0.2), retryTo(2, primary, s30, time.Minute, 3)}, // 0.2 + 0.2 ≤ 0.5
			{used(2, 10, 10, 0.2), over},                                     // 0.4 + 0.2 > 0.5
		}},
		"CostBudgetIgnoresUnreportedCost": {budget(0, 0.01), []step{
			{used(1, 1e6, 1e6, 0), retryTo(2, primary, s30, time.Minute, 3)},
		}},
		"NothingReportedNeverStops": {budget(1, 0.01), []step{
			{at(1, failed, -1), retryTo(2, primary, s30, time.Minute, 3)},
			{at(2, failed, -1), retryTo(3, primary, s60, time.Minute, 2)},
			{at(3, failed, -1), retryTo(4, primary, s90, time.Minute, 1)},
			{at(4, failed, -1), final(retry.ActionQuarantine, schemas.ReasonExhausted)},
		}},
		"TheLastAttemptEndsExhausted": {budget(100, 0), []step{
			{used(1, 10, 10, 0), retryTo(2, primary, s30, time.Minute, 3)},
			{used(2, 10, 10, 0), retryTo(3, primary, s60, time.Minute, 2)},
			{used(3, 10, 10, 0), retryTo(4, primary, s90, time.Minute, 1)},
			{used(4, 100, 100, 0), final(retry.ActionQuarantine, schemas.ReasonExhausted)},
		}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			walk(t, retry.Input{Policy: tc.policy}, tc.steps)
		})
	}
}

// TestDecideUsageBudgetOrder: success, terminal failures and a confirmed
// plateau keep their own endings; the budget only replaces a retry.
func TestDecideUsageBudgetOrder(t *testing.T) {
	t.Parallel()
	p := retry.PersonaPolicy(time.Minute)
	p.UsageBudget = retry.UsageBudget{MaxTokens: 10}
	big := retry.Usage{InputTokens: 100}
	for class, want := range map[retry.Class]retry.Decision{
		retry.ClassSucceeded: {Action: retry.ActionAck, Counted: true},
		retry.ClassTerminal:  final(retry.ActionQuarantine, schemas.ReasonTerminal),
		retry.ClassTimeout:   final(retry.ActionQuarantine, schemas.ReasonBudgetExhausted),
	} {
		a := at(1, class, -1)
		a.Usage = big
		got := retry.Decide(retry.Input{Policy: p, Current: a})
		require.Equal(t, want.Action, got.Action, class)
		require.Equal(t, want.Reason, got.Reason, class)
	}
}

func TestDecideUsageBudgetDetail(t *testing.T) {
	t.Parallel()
	p := retry.PersonaPolicy(time.Minute)
	p.UsageBudget = retry.UsageBudget{MaxTokens: 1000}
	got := retry.Decide(retry.Input{Policy: p, History: []retry.Attempt{used(1, 300, 100, 0)}, Current: used(2, 300, 100, 0)})
	require.Equal(t, "token budget 1000: 800 tokens spent over 2 attempt(s), the next one expected to use up to 400; "+
		"no further attempt, task blocked; last: retryable: retryable on attempt 2", got.Detail)
	require.True(t, got.Blocked)
	require.Contains(t, retry.Message(used(2, 300, 100, 0), got, "t", "s", "p"), "budget exhausted; task blocked")

	p.UsageBudget = retry.UsageBudget{MaxCostUSD: 0.25}
	got = retry.Decide(retry.Input{Policy: p, History: []retry.Attempt{used(1, 0, 0, 0.1)}, Current: used(2, 0, 0, 0.1)})
	require.Contains(t, got.Detail, "cost budget $0.25: $0.2 spent over 2 attempt(s), the next one expected to cost up to $0.1")
}

func TestUsageBudgetValidate(t *testing.T) {
	t.Parallel()
	p := retry.PersonaPolicy(time.Minute)
	for field, b := range map[string]retry.UsageBudget{
		"budget.max_tokens":   {MaxTokens: -1},
		"budget.max_cost_usd": {MaxCostUSD: -0.5},
	} {
		p.UsageBudget = b
		err := p.Validate()
		require.ErrorIs(t, err, retry.ErrInvalidPolicy)
		require.ErrorContains(t, err, field)
	}
	p.UsageBudget = retry.UsageBudget{MaxCostUSD: math.NaN()}
	require.ErrorContains(t, p.Validate(), "budget.max_cost_usd")
	p.UsageBudget = retry.UsageBudget{MaxTokens: 1, MaxCostUSD: 1}
	require.NoError(t, p.Validate())
}

// TestUsageBudgetTighter: a request's budget can only tighten its policy's.
func TestUsageBudgetTighter(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ policy, request, want retry.UsageBudget }{
		{retry.UsageBudget{}, retry.UsageBudget{MaxTokens: 5}, retry.UsageBudget{MaxTokens: 5}},
		{retry.UsageBudget{MaxTokens: 5}, retry.UsageBudget{}, retry.UsageBudget{MaxTokens: 5}},
		{retry.UsageBudget{MaxTokens: 5}, retry.UsageBudget{MaxTokens: 9}, retry.UsageBudget{MaxTokens: 5}},
		{retry.UsageBudget{MaxTokens: 9, MaxCostUSD: 1}, retry.UsageBudget{MaxTokens: 5, MaxCostUSD: 2},
			retry.UsageBudget{MaxTokens: 5, MaxCostUSD: 1}},
	} {
		require.Equal(t, tc.want, tc.policy.Tighter(tc.request))
		p := retry.PersonaPolicy(time.Minute)
		p.UsageBudget = tc.policy
		require.Equal(t, tc.want, p.WithOverrides(retry.Overrides{UsageBudget: tc.request}).UsageBudget)
	}
}

func TestTotalUsage(t *testing.T) {
	t.Parallel()
	got := retry.TotalUsage([]retry.Attempt{used(1, 1, 2, 0.5), used(2, 10, 20, 0.25), at(3, failed, -1)})
	require.Equal(t, retry.Usage{InputTokens: 11, OutputTokens: 22, CostUSD: 0.75}, got)
	require.EqualValues(t, 33, got.Tokens())
	require.False(t, got.IsZero())
	require.True(t, retry.Usage{}.IsZero())
	require.False(t, errors.Is(retry.UsageBudget{}.Validate(), retry.ErrInvalidPolicy))
}

func TestExplainShowsTheUsageBudget(t *testing.T) {
	t.Parallel()
	p := retry.PersonaPolicy(time.Minute)
	var plain strings.Builder
	require.NoError(t, retry.Explain(p).WriteText(&plain))
	require.NotContains(t, plain.String(), "usage budget")

	p.UsageBudget = retry.UsageBudget{MaxTokens: 50_000, MaxCostUSD: 2.5}
	e := retry.Explain(p)
	require.EqualValues(t, 50_000, e.BudgetMaxTokens)
	require.Equal(t, 2.5, e.BudgetMaxCostUSD)
	var text strings.Builder
	require.NoError(t, e.WriteText(&text))
	require.Contains(t, text.String(), "usage budget     50000 tokens, $2.5")
}
