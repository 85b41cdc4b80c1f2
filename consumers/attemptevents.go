package consumers

import (
	"github.com/personaq/personaq/retry"
	"github.com/personaq/personaq/schemas"
)

// Attempt events tell a waiting caller what is happening ("attempt 2
// failed (timeout), retrying in 30s with agent-b"). They are published
// without waiting for the server (core NATS publish into the attempts
// stream): they cost the pipeline no round trip, and one lost on a
// reconnect loses nothing the terminal record does not say.

func (r *Runtime) attemptStarted(st *attemptState) {
	if r.cfg.NoAttemptEvents {
		return
	}
	ev := r.attemptEvent(st, schemas.AttemptStarted)
	r.publishAttempt(st, ev)
}

// attemptFailed reports a failed attempt and what the decision made of it.
func (r *Runtime) attemptFailed(st *attemptState, d retry.Decision) {
	if r.cfg.NoAttemptEvents || !st.attempt.Class.Failed() {
		return
	}
	ev := r.attemptEvent(st, schemas.AttemptFailed)
	a := st.attempt
	ev.Class, ev.Error, ev.DurationMs = a.Class.String(), a.Error, a.Duration.Milliseconds()
	if a.Progress.Known() {
		ev.Progress = &schemas.Progress{Completed: a.Progress.Completed, Total: a.Progress.Total}
	}
	ev.Usage = a.Usage.Record()
	if d.Action == retry.ActionRetry {
		ev.NextAttempt, ev.NextAgent, ev.NextDelayMs = d.NextAttempt, st.agentFor(d.Role), d.Delay.Milliseconds()
	}
	r.publishAttempt(st, ev)
}

func (r *Runtime) attemptEvent(st *attemptState, kind schemas.AttemptKind) *schemas.AttemptEvent {
	return &schemas.AttemptEvent{
		SchemaVersion: schemas.Version, RequestID: st.req.RequestID, TaskID: st.req.TaskID, Step: st.req.Step,
		Persona: st.persona.name, Kind: kind, Attempt: st.attempt.Number, MaxAttempts: st.policy.MaxAttempts,
		Agent: st.attempt.Agent, CorrelationID: st.corrID, At: r.now().UTC(),
	}
}

func (r *Runtime) publishAttempt(st *attemptState, ev *schemas.AttemptEvent) {
	data, err := schemas.MarshalAttempt(ev)
	if err == nil {
		err = r.js.Conn().Publish(r.topo.AttemptSubject(ev.RequestID, string(ev.Kind)), data)
	}
	if err != nil {
		st.log.Debug().Err(err).Str("kind", string(ev.Kind)).Msg("attempt event not published")
	}
}
