package retry

import (
	"slices"
	"time"
)

// Overrides are a request's inline changes to the policy it runs under (its
// policy_overrides). Zero fields keep the policy's value.
type Overrides struct {
	// MaxAttempts replaces Policy.MaxAttempts when positive (a step's
	// maxRetries N is MaxAttempts N+1).
	MaxAttempts int
	// AttemptTimeout replaces Policy.AttemptTimeout when positive.
	AttemptTimeout time.Duration
	// Backoffs, when not empty, become the schedule: the delay before
	// retry 1, 2, …, the last repeating (List).
	Backoffs []time.Duration
	// NonRetryable adds error type names to the policy's.
	NonRetryable []string
	// UsageBudget tightens the policy's, limit by limit
	// (UsageBudget.Tighter): a request cannot loosen its policy's budget.
	UsageBudget UsageBudget
	// QueueWait replaces Policy.QueueWait when positive.
	QueueWait time.Duration
}

// WithOverrides returns p with o applied; p itself is not modified.
func (p Policy) WithOverrides(o Overrides) Policy {
	if o.MaxAttempts > 0 {
		p.MaxAttempts = o.MaxAttempts
	}
	if o.AttemptTimeout > 0 {
		p.AttemptTimeout = o.AttemptTimeout
	}
	if len(o.Backoffs) > 0 {
		p.Schedule = List{Delays: slices.Clone(o.Backoffs)}
	}
	p.NonRetryable = slices.Concat(p.NonRetryable, o.NonRetryable)
	p.UsageBudget = p.UsageBudget.Tighter(o.UsageBudget)
	if o.QueueWait > 0 {
		p.QueueWait = o.QueueWait
	}
	return p
}

// ForRequest resolves the policy one request runs under: base (its
// persona's policy), or the preset the request names (when it names
// another) with base's attempt timeout and persona kept, since timeouts
// belong to personas and retry shapes to categories; then the request's
// overrides. presets looks a name up (nil: Preset). The result is
// validated.
func ForRequest(base Policy, preset string, o Overrides, presets func(string) (Policy, error)) (Policy, error) {
	if presets == nil {
		presets = Preset
	}
	p := base
	if preset != "" && preset != base.Name {
		named, err := presets(preset)
		if err != nil {
			return Policy{}, err
		}
		named.AttemptTimeout, named.Persona = base.AttemptTimeout, base.Persona
		p = named
	}
	p = p.WithOverrides(o)
	if err := p.Validate(); err != nil {
		return Policy{}, err
	}
	return p, nil
}
