package retry

import (
	"fmt"
	"math"

	"github.com/personaq/personaq/schemas"
)

// Usage is what one attempt consumed at its model provider, as its handler
// reported it. The zero value means nothing was reported.
type Usage struct {
	InputTokens  int64
	OutputTokens int64
	// CostUSD is the attempt's cost in US dollars; 0 means unknown.
	CostUSD float64
}

// Tokens is input plus output tokens.
func (u Usage) Tokens() int64 { return u.InputTokens + u.OutputTokens }

// IsZero reports whether nothing was reported.
func (u Usage) IsZero() bool { return u == Usage{} }

// Add returns the sum of u and v.
func (u Usage) Add(v Usage) Usage {
	return Usage{InputTokens: u.InputTokens + v.InputTokens, OutputTokens: u.OutputTokens + v.OutputTokens,
		CostUSD: u.CostUSD + v.CostUSD}
}

// TotalUsage sums the usage of attempts.
func TotalUsage(attempts []Attempt) Usage {
	var total Usage
	for _, a := range attempts {
		total = total.Add(a.Usage)
	}
	return total
}

// UsageBudget bounds what one request may spend across all its attempts.
// A zero field sets no limit. It is not the step budget (Budget), which
// bounds time.
type UsageBudget struct {
	// MaxTokens bounds input plus output tokens.
	MaxTokens int64
	// MaxCostUSD bounds the cost in US dollars; it only applies to
	// handlers that report a cost.
	MaxCostUSD float64
}

// IsZero reports whether the budget sets no limit.
func (b UsageBudget) IsZero() bool { return b == UsageBudget{} }

// Validate names the first negative or non-finite limit, wrapped in
// ErrInvalidPolicy.
func (b UsageBudget) Validate() error {
	switch {
	case b.MaxTokens < 0:
		return fieldErr("budget.max_tokens", "must not be negative, got %d", b.MaxTokens)
	case b.MaxCostUSD < 0 || math.IsNaN(b.MaxCostUSD) || math.IsInf(b.MaxCostUSD, 0):
		return fieldErr("budget.max_cost_usd", "must be a non-negative number, got %g", b.MaxCostUSD)
	}
	return nil
}

// Tighter returns, limit by limit, the lower of b's and o's (a limit set on
// one side only is kept): a request's budget can tighten its policy's but
// never loosen it.
func (b UsageBudget) Tighter(o UsageBudget) UsageBudget {
	return UsageBudget{MaxTokens: lowerLimit(b.MaxTokens, o.MaxTokens), MaxCostUSD: lowerLimit(b.MaxCostUSD, o.MaxCostUSD)}
}

func lowerLimit[T int64 | float64](a, b T) T {
	switch {
	case a == 0:
		return b
	case b == 0:
		return a
	}
	return min(a, b)
}

// overBudget decides whether another attempt would overspend p's usage
// budget: what the attempts so far spent, plus a next attempt projected to
// use as much as the largest of them, exceeds a limit. Attempts that
// reported no usage project nothing, so a budget never stops a persona
// that does not report usage.
func overBudget(p Policy, in Input, all []Attempt) (Decision, bool) {
	b := p.UsageBudget
	if b.IsZero() {
		return Decision{}, false
	}
	spent := TotalUsage(all)
	var nextTokens int64 // the largest attempt, limit by limit
	var nextCost float64
	for _, a := range all {
		nextTokens, nextCost = max(nextTokens, a.Usage.Tokens()), max(nextCost, a.Usage.CostUSD)
	}
	var why string
	switch {
	case b.MaxTokens > 0 && spent.Tokens()+nextTokens > b.MaxTokens:
		why = fmt.Sprintf("token budget %d: %d tokens spent over %d attempt(s), the next one expected to use up to %d",
			b.MaxTokens, spent.Tokens(), len(all), nextTokens)
	case b.MaxCostUSD > 0 && spent.CostUSD+nextCost > b.MaxCostUSD:
		why = fmt.Sprintf("cost budget $%g: $%g spent over %d attempt(s), the next one expected to cost up to $%g",
			b.MaxCostUSD, roundCents(spent.CostUSD), len(all), roundCents(nextCost))
	default:
		return Decision{}, false
	}
	return blocked(ActionQuarantine, schemas.ReasonBudgetExhausted, fmt.Sprintf(
		"%s; no further attempt, task blocked; last: %s: %s", why, in.Current.Class, in.Current.Error)), true
}

// roundCents keeps sums of float costs readable (0.30000000000000004).
func roundCents(usd float64) float64 { return math.Round(usd*1e6) / 1e6 }
