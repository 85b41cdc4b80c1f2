package consumers

import (
	"github.com/rs/zerolog"

	"github.com/personaq/personaq/retry"
)

// UsageObserver is an Observer that also counts what attempts consumed at
// their model provider (tokens, cost), as their handlers reported it. It
// is called once per attempt that reported usage, right after the handler
// returned, whatever became of the attempt (an attempt cut short by a
// shutdown or a lost lease was still paid for).
type UsageObserver interface {
	Observer
	Usage(persona string, u retry.Usage)
}

// observeUsage reports an attempt's usage.
func (r *Runtime) observeUsage(persona string, u retry.Usage) {
	if o, ok := r.obs.(UsageObserver); ok {
		o.Usage(persona, u)
	}
}

// spent sums the usage of the request's attempts: the recorded ones and
// the current one (when it ran and is not among them).
func (st *attemptState) spent() retry.Usage {
	return retry.TotalUsage(st.history).Add(st.attempt.Usage)
}

// logBudget adds what a request spent and its budget to the line that
// ends it with budget_exhausted.
func logBudget(st *attemptState, e *zerolog.Event) *zerolog.Event {
	u, b := st.spent(), st.policy.UsageBudget
	return e.Int64("spent_input_tokens", u.InputTokens).Int64("spent_output_tokens", u.OutputTokens).
		Int64("spent_tokens", u.Tokens()).Float64("spent_cost_usd", u.CostUSD).
		Int64("budget_max_tokens", b.MaxTokens).Float64("budget_max_cost_usd", b.MaxCostUSD)
}
