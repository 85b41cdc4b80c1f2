package consumers

import (
	"fmt"
	"time"

	"github.com/personaq/personaq/retry"
	"github.com/personaq/personaq/schemas"
)

// policyFor resolves the policy a request runs under: the persona's policy,
// or the preset the request names (the persona's attempt timeout is kept:
// timeouts belong to personas, retry shapes to categories), then the
// request's inline overrides.
func (r *Runtime) policyFor(p *personaRuntime, req *schemas.PersonaRequest) (retry.Policy, error) {
	return resolvePolicy(p.policy, req, r.presets)
}

// resolvePolicy applies req's policy name and overrides to the persona's
// policy pol.
func resolvePolicy(pol retry.Policy, req *schemas.PersonaRequest, presets func(string) (retry.Policy, error)) (retry.Policy, error) {
	if req.Policy != "" && req.Policy != pol.Name {
		named, err := presets(req.Policy)
		if err != nil {
			return retry.Policy{}, fmt.Errorf("request policy: %w", err)
		}
		named.AttemptTimeout = pol.AttemptTimeout
		pol = named
	}
	pol = applyOverrides(pol, req.PolicyOverrides)
	if err := pol.Validate(); err != nil {
		return retry.Policy{}, fmt.Errorf("request policy: %w", err)
	}
	return pol, nil
}

func applyOverrides(p retry.Policy, o *schemas.PolicyOverrides) retry.Policy {
	if o == nil {
		return p
	}
	if o.MaxAttempts > 0 {
		p.MaxAttempts = o.MaxAttempts
	}
	if o.AttemptTimeoutMs > 0 {
		p.AttemptTimeout = time.Duration(o.AttemptTimeoutMs) * time.Millisecond
	}
	if len(o.BackoffMs) > 0 {
		list := make([]time.Duration, len(o.BackoffMs))
		for i, ms := range o.BackoffMs {
			list[i] = time.Duration(ms) * time.Millisecond
		}
		p.Schedule = retry.List{Delays: list}
	}
	p.NonRetryable = append(p.NonRetryable[:len(p.NonRetryable):len(p.NonRetryable)], o.NonRetryable...)
	return p
}
