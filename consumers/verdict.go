package consumers

import (
	"github.com/rs/zerolog"

	"github.com/personaq/personaq/retry"
)

// toVerdict maps the decision onto how the message is settled and logs it
// with the fields operators grep for.
func (r *Runtime) toVerdict(st *attemptState) {
	d := st.decision
	switch d.Action {
	case retry.ActionAck:
		st.verdict = verdictAck
		r.logAttempt(st, st.log.Info()).Msg("Persona request succeeded")
	case retry.ActionRetry:
		st.verdict, st.delay = verdictRetry, d.Delay
		r.logRetry(st)
	default:
		st.verdict = verdictQuarantine
		r.logStop(st)
	}
}

func (r *Runtime) logAttempt(st *attemptState, e *zerolog.Event) *zerolog.Event {
	a := st.attempt
	e = e.Int("attempt", a.Number).Str("agent", a.Agent).Str("role", string(a.Role)).
		Str("class", a.Class.String()).Dur("duration", a.Duration)
	if a.Progress.Known() {
		e = e.Int("tasks_completed", a.Progress.Completed).Int("tasks_total", a.Progress.Total)
	}
	if a.Error != "" {
		e = e.Str("error", a.Error)
	}
	return e
}

// logRetry writes seed 001's pair of lines: why this attempt failed and how
// long until the next; validation retries carry seed 002's "[RETRY N]" tag.
func (r *Runtime) logRetry(st *attemptState) {
	d := st.decision
	fail := r.logAttempt(st, st.log.Warn()).Int("remainingRetries", d.RemainingRetries)
	switch st.attempt.Class {
	case retry.ClassTimeout:
		fail.Msg("Persona request timed out, will retry")
	case retry.ClassSnooze:
		fail.Msg("Persona request snoozed; attempt not counted")
	case retry.ClassValidation:
		fail.Msgf("[RETRY %d] Validation failed, retrying with feedback", d.NextAttempt)
	default:
		fail.Msgf("[RETRY %d] Persona request failed (%s), will retry", d.NextAttempt, st.attempt.Class)
	}
	st.log.Info().Int("attempt", d.NextAttempt).Str("agent", st.agentFor(d.Role)).Str("role", string(d.Role)).
		Float64("backoffSeconds", d.Delay.Seconds()).Dur("timeout", d.Timeout).
		Msg("Retrying persona request after " + st.attempt.Class.String() + " with backoff delay")
}

func (r *Runtime) logStop(st *attemptState) {
	d := st.decision
	e := r.logAttempt(st, st.log.Error()).Str("reason", d.Reason).Str("detail", d.Detail)
	switch d.Action {
	case retry.ActionDefer:
		e.Int("plateau_completed", d.Plateau.Completed).Int("plateau_total", d.Plateau.Total).
			Msg("Task step deferred: hit a complexity limit (plateau across agents)")
	case retry.ActionEscalate:
		e.Msg("Task step escalated: all retries exhausted")
	default:
		if d.Reason == retry.ReasonExhausted {
			e.Msg("All retries exhausted; task blocked, request quarantined")
			return
		}
		e.Msg("Persona request quarantined")
	}
}
