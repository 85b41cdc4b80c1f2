package schemas

import "unicode/utf8"

// json.Marshal replaces the bytes of a Go string that are not valid UTF-8
// with U+FFFD, so a message built from such a string would be published
// already rewritten (and two different ids could become one). Encode
// refuses it instead, naming the field, the same way decoding refuses such
// bytes on the wire.

// invalidText returns the first field of v holding text that is not valid
// UTF-8, for the message types callers build from outside input.
func invalidText(v any) (string, bool) {
	switch m := v.(type) {
	case PersonaRequest:
		return m.invalidText()
	case *PersonaRequest:
		return m.invalidText()
	case CompensationRequest:
		return m.invalidText()
	case *CompensationRequest:
		return m.invalidText()
	}
	return "", false
}

func (r *PersonaRequest) invalidText() (string, bool) {
	if r == nil {
		return "", false
	}
	// An array, not a slice that grows: producers encode every request.
	fields := [...]struct{ name, v string }{
		{"request_id", r.RequestID}, {"task_id", r.TaskID}, {"step", r.Step}, {"persona", r.Persona},
		{"agents.primary", r.Agents.Primary}, {"agents.fallback", r.Agents.Fallback},
		{"policy", r.Policy}, {"correlation_id", r.CorrelationID},
	}
	for _, f := range fields {
		if !utf8.ValidString(f.v) {
			return f.name, true
		}
	}
	if !utf8.Valid(r.Input) {
		return "input", true
	}
	if r.PolicyOverrides != nil {
		for _, n := range r.PolicyOverrides.NonRetryable {
			if !utf8.ValidString(n) {
				return "policy_overrides.non_retryable", true
			}
		}
	}
	return "", false
}

func (c *CompensationRequest) invalidText() (string, bool) {
	if c == nil {
		return "", false
	}
	fields := []struct{ name, v string }{
		{"request_id", c.RequestID}, {"saga_id", c.SagaID}, {"kind", string(c.Kind)}, {"target", c.Target},
		{"task_id", c.TaskID}, {"args", string(c.Args)}, {"correlation_id", c.CorrelationID},
	}
	for _, f := range fields {
		if !utf8.ValidString(f.v) {
			return f.name, true
		}
	}
	return "", false
}
