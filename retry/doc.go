// Package retry is personaq's pure retry core: backoff schedules, policies and
// their presets, step-deadline budgets, and the decision function that turns
// an attempt history plus the outcome of the attempt just made into what
// happens next (ack, retry after a delay with an agent, quarantine, defer,
// escalate).
//
// Nothing here does I/O or reads the clock: callers pass times in, and jitter
// draws from an injected source, so every rule is testable table by table.
//
// The rules, by concept:
//   - explicit policy on every call with presets per category (llm, local,
//     git, write) and non-retryable error types matched by simple type name;
//   - persona timeouts, linear 30s/60s/90s backoff and the step deadline
//     (maxRetries+1)×timeout + Σbackoff + 30s;
//   - validation failures retried at once with the error fed back;
//   - primary/fallback agent alternation, plateau → defer, zero progress →
//     escalate, network errors wait 60s and do not count toward plateau.
//
// Beyond them, a policy may carry a UsageBudget (tokens, cost): Decide ends
// a request with schemas.ReasonBudgetExhausted rather than retry when what its
// attempts reported using (Attempt.Usage), plus a next attempt as large as
// the largest so far, would exceed it.
//
// Entry points: Preset and PresetNames (named policies), PersonaDefaults
// (per-persona timeouts, PERSONA_TIMEOUTS_JSON), NewBudget (how long a step
// must stay alive), Explain (what `personaq policy explain` prints), Decide
// (what happens after an attempt) and DelayRange (a schedule's delay bounds,
// checked: a custom schedule's out-of-range delay is replaced and reported).
package retry
