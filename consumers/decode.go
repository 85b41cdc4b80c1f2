package consumers

import (
	"fmt"

	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/personaq/personaq/retry"
	"github.com/personaq/personaq/schemas"
)

// HeaderCorrelationID carries the correlation id when the request body has none.
const HeaderCorrelationID = "Correlation-Id"

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
			st.corrID = msg.Metadata.Get(HeaderCorrelationID)
			r.stop(st, retry.Attempt{Class: retry.ClassInvalidMessage, Error: err.Error(), At: r.now()})
			return nil, nil
		}
		st.req = req
		st.corrID = correlationID(req, msg)
		st.log = st.log.With().Str("task_id", req.TaskID).Str("step", req.Step).
			Str("request_id", req.RequestID).Str("correlation_id", st.corrID).Logger()
		if st.policy, err = r.policyFor(st.persona, req); err != nil {
			r.stop(st, retry.Attempt{Class: retry.ClassTerminal, Error: err.Error(), At: r.now()})
			return nil, nil
		}
		return next(msg)
	}
}

// stop decides a message that never reached a handler.
func (r *Runtime) stop(st *attemptState, a retry.Attempt) {
	st.decision = retry.Decide(retry.Input{Policy: retry.Policy{MaxAttempts: 1, AttemptTimeout: 1}, Current: a})
	st.verdict = verdictQuarantine
	st.log.Warn().Str("reason", st.decision.Reason).Str("detail", st.decision.Detail).Msg("Persona request rejected before any attempt")
}

func correlationID(req *schemas.PersonaRequest, msg *message.Message) string {
	if req.CorrelationID != "" {
		return req.CorrelationID
	}
	if id := msg.Metadata.Get(HeaderCorrelationID); id != "" {
		return id
	}
	return req.RequestID
}
