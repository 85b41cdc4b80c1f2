package consumers

import (
	"fmt"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/personaq/personaq/retry"
	"github.com/personaq/personaq/schemas"
)

// decode is the first stage: the request, its policy and its step
// deadline. A message that does not decode, or names another persona than
// its subject, is quarantined as invalid_message without running anything;
// so is one whose deadline passed before this delivery.
func (r *Runtime) decode(msg *message.Message, st *attemptState) (ending, bool) {
	req, err := schemas.DecodeRequestInPlace(msg.Payload) // the payload is kept, never written

	if err == nil && req.Persona != st.persona.name {
		err = fmt.Errorf("persona %q does not match subject persona %q", req.Persona, st.persona.name)
	}
	if err != nil {
		st.corrID = msg.Metadata.Get(schemas.HeaderCorrelationID)
		if st.rawID, _ = rawRequestID(msg.Payload); req != nil {
			st.rawID = req.RequestID
		}
		return r.reject(st, retry.Attempt{Class: retry.ClassInvalidMessage, Error: err.Error(), At: r.now()}), true
	}
	st.req = req
	st.corrID = correlationID(req, msg)
	st.log.decoded(req, st.corrID)
	if st.deadline, err = parseDeadline(msg.Metadata.Get(schemas.HeaderDeadline)); err != nil {
		return r.reject(st, retry.Attempt{Class: retry.ClassInvalidMessage, Error: err.Error(), At: r.now()}), true
	}
	if st.policy, err = r.policyFor(st.persona, req); err != nil {
		return r.reject(st, retry.Attempt{Class: retry.ClassTerminal, Error: err.Error(), At: r.now()}), true
	}
	if !st.deadline.IsZero() && !r.now().Before(st.deadline) {
		st.log.Warn().Time("deadline", st.deadline).Msg("Step deadline passed; request ends without another attempt")
		return quarantined(deadlineDecision(st.deadline, "passed before this delivery; not run")), true
	}
	return ending{}, false
}

// reject ends a message that never reached a handler.
func (r *Runtime) reject(st *attemptState, a retry.Attempt) ending {
	d := retry.Decide(retry.Input{Policy: retry.Policy{MaxAttempts: 1, AttemptTimeout: 1}, Current: a})
	st.log.Warn().Str("reason", string(d.Reason)).Str("detail", d.Detail).Msg("Persona request rejected before any attempt")
	return quarantined(d)
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

func correlationID(req *schemas.PersonaRequest, msg *message.Message) string {
	if req.CorrelationID != "" {
		return req.CorrelationID
	}
	if id := msg.Metadata.Get(schemas.HeaderCorrelationID); id != "" {
		return id
	}
	return req.RequestID
}
