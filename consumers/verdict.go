package consumers

import (
	"github.com/rs/zerolog"

	"github.com/personaq/personaq/retry"
	"github.com/personaq/personaq/schemas"
)

// message is the shared wording of retry.Message for this attempt.
func (r *Runtime) message(st *attemptState, d retry.Decision) string {
	var task, step string
	if st.req != nil {
		task, step = st.req.TaskID, st.req.Step
	}
	return retry.Message(st.attempt, d, task, step, st.persona.name)
}

func (r *Runtime) logAttempt(st *attemptState, e *zerolog.Event) *zerolog.Event {
	a := st.attempt
	e = e.Int("attempt", a.Number).Str("agent", a.Agent).Str("role", string(a.Role)).
		Str("class", a.Class.String()).Dur("duration", a.Duration)
	if a.Progress.Known() {
		e = e.Int("tasks_completed", a.Progress.Completed).Int("tasks_total", a.Progress.Total)
	}
	if len(a.ErrorTypes) > 0 {
		e = e.Str("error_type", a.ErrorTypes[0])
	}
	if a.Error != "" {
		e = e.Str("error", a.Error)
	}
	return e
}

// logRetry writes the step budget's pair of lines: why this attempt failed
// ("[RETRY N] Validation: …", "[RETRY N] API error: …", or "Persona request
// timed out, will retry") and how long until the next.
func (r *Runtime) logRetry(st *attemptState, d retry.Decision) {
	r.logAttempt(st, st.log.Warn()).Int("remainingRetries", d.RemainingRetries).Msg(r.message(st, d))
	st.log.Info().Int("attempt", d.NextAttempt).Str("agent", st.agentFor(d.Role)).Str("role", string(d.Role)).
		Float64("backoffSeconds", d.Delay.Seconds()).Dur("timeout", d.Timeout).
		Dur("progress_interval", d.ProgressInterval).
		Msg("Retrying persona request after " + st.attempt.Class.String() + " with backoff delay")
}

// logStop writes the final line: the tagged final failure and what became
// of the task (blocked, escalated), or adaptive retry's DEFER line.
func (r *Runtime) logStop(st *attemptState, d retry.Decision) {
	level := st.log.Error()
	if d.Action == retry.ActionDefer { // a deferred task is parked, not failed
		level = st.log.Warn()
	}
	e := r.logAttempt(st, level).Str("reason", string(d.Reason)).Str("detail", d.Detail).Bool("blocked", d.Blocked)
	if d.Action == retry.ActionDefer && d.Plateau != nil {
		e = e.Int("plateau_completed", d.Plateau.Completed).Int("plateau_total", d.Plateau.Total)
	}
	if d.Reason == schemas.ReasonBudgetExhausted {
		e = logBudget(st, e)
	}
	e.Msg(r.message(st, d))
}
