package consumers

import (
	"fmt"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/personaq/personaq/retry"
	"github.com/personaq/personaq/schemas"
)

// decodeMiddleware decodes the request and resolves its policy. A message
// that does not decode, or names another persona than its subject, is
// quarantined as invalid_message without running anything.
func (r *Runtime) decodeMiddleware(next message.HandlerFunc) message.HandlerFunc {
	return func(msg *message.Message) ([]*message.Message, error) {
		st := stateOf(msg)
		req, err := schemas.DecodeRequest(msg.Payload)
		if err == nil && req.Persona != st.persona.name {
			err = fmt.Errorf("persona %q does not match subject persona %q", req.Persona, st.persona.name)
		}
		if err != nil {
			st.corrID = msg.Metadata.Get(schemas.HeaderCorrelationID)
			r.stop(st, retry.Attempt{Class: retry.ClassInvalidMessage, Error: err.Error(), At: r.now()})
			return nil, nil
		}
		st.req = req
		st.corrID = correlationID(req, msg)
		st.log = st.log.With().Str("task_id", req.TaskID).Str("step", req.Step).
			Str("request_id", req.RequestID).Str("correlation_id", st.corrID).Logger()
		if st.deadline, err = parseDeadline(msg.Metadata.Get(schemas.HeaderDeadline)); err != nil {
			r.stop(st, retry.Attempt{Class: retry.ClassInvalidMessage, Error: err.Error(), At: r.now()})
			return nil, nil
		}
		if st.policy, err = r.policyFor(st.persona, req); err != nil {
			r.stop(st, retry.Attempt{Class: retry.ClassTerminal, Error: err.Error(), At: r.now()})
			return nil, nil
		}
		if !st.deadline.IsZero() && !r.now().Before(st.deadline) {
			st.decision, st.verdict = deadlineDecision(st.deadline, "passed before this delivery; not run"), verdictQuarantine
			st.log.Warn().Time("deadline", st.deadline).Msg("Step deadline passed; request ends without another attempt")
			return nil, nil
		}
		return next(msg)
	}
}

// stop decides a message that never reached a handler.
func (r *Runtime) stop(st *attemptState, a retry.Attempt) {
	st.decision = retry.Decide(retry.Input{Policy: retry.Policy{MaxAttempts: 1, AttemptTimeout: 1}, Current: a})
	st.verdict = verdictQuarantine
	st.log.Warn().Str("reason", string(st.decision.Reason)).Str("detail", st.decision.Detail).Msg("Persona request rejected before any attempt")
}

func parseDeadline(v string) (time.Time, error) {
	if v == "" {
		return time.Time{}, nil
	}
	t, err := time.Parse(time.RFC3339Nano, v)
	if err != nil {
		return time.Time{}, fmt.Errorf("header %s: not an RFC 3339 time: %q", schemas.HeaderDeadline, v)
	}
	return t, nil
}

// checkDeadline turns a retry that could not start before the caller's
// step deadline into the request's end: nobody is waiting for it.
func (r *Runtime) checkDeadline(st *attemptState) {
	d := st.decision
	if st.deadline.IsZero() || d.Action != retry.ActionRetry {
		return
	}
	if r.now().Add(d.Delay).Before(st.deadline) {
		return
	}
	st.decision = deadlineDecision(st.deadline, fmt.Sprintf("passes before retry %d could start (in %s); last: %s", d.NextAttempt, d.Delay, st.attempt.Error))
	st.decision.Counted = true
}

func correlationID(req *schemas.PersonaRequest, msg *message.Message) string {
	if req.CorrelationID != "" {
		return req.CorrelationID
	}
	if id := msg.Metadata.Get(schemas.HeaderCorrelationID); id != "" {
		return id
	}
	return req.RequestID
}
