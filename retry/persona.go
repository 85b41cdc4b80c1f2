package retry

import (
	"maps"
	"slices"
	"time"
)

// The step budget's global persona defaults.
const (
	// DefaultPersonaTimeout bounds an attempt of a persona with no timeout
	// of its own (personaDefaultTimeoutMs).
	DefaultPersonaTimeout = 10 * time.Minute
	// DefaultCodingTimeout bounds an attempt of a coding persona with no
	// timeout of its own (personaCodingTimeoutMs).
	DefaultCodingTimeout = 3 * time.Minute
	// DefaultMaxRetries is the retries after the first attempt
	// (personaTimeoutMaxRetries): 4 attempts in all.
	DefaultMaxRetries = 3
)

// PersonaTimeouts maps a persona name to its attempt timeout.
type PersonaTimeouts map[string]time.Duration

// DefaultPersonaTimeouts returns the built-in per-persona timeouts:
// fast planner 30s, medium context and QA 60s, slow lead engineer 90s.
func DefaultPersonaTimeouts() PersonaTimeouts {
	return PersonaTimeouts{
		"context":       60 * time.Second,
		"planner":       30 * time.Second,
		"lead-engineer": 90 * time.Second,
		"tester-qa":     60 * time.Second,
	}
}

// PersonaDefaults resolves a persona's attempt timeout and policy.
//
// Precedence, highest first:
//  1. a per-step override: the caller sets Policy.AttemptTimeout or
//     Policy.MaxAttempts on the resolved policy (schemas.PolicyOverrides);
//  2. config/env per persona: Merge (config first, then PERSONA_TIMEOUTS_JSON);
//  3. built-in per persona: DefaultPersonaTimeouts;
//  4. CodingTimeout, for personas listed in Coding;
//  5. DefaultTimeout.
//
// An explicit per-persona timeout (2 or 3) wins over the coding timeout.
type PersonaDefaults struct {
	// Timeouts per persona. NewPersonaDefaults: DefaultPersonaTimeouts().
	Timeouts PersonaTimeouts
	// DefaultTimeout is the fallback. Default: 10 min.
	DefaultTimeout time.Duration
	// CodingTimeout applies to Coding personas. Default: 3 min.
	CodingTimeout time.Duration
	// Coding lists the coding personas. Default: none.
	Coding []string
	// MaxRetries after the first attempt. Default (zero): 3. For a step
	// without retries, set MaxAttempts = 1 on the resolved policy.
	MaxRetries int
}

// NewPersonaDefaults returns the step budget's defaults.
func NewPersonaDefaults() PersonaDefaults {
	return PersonaDefaults{
		Timeouts:       DefaultPersonaTimeouts(),
		DefaultTimeout: DefaultPersonaTimeout,
		CodingTimeout:  DefaultCodingTimeout,
		MaxRetries:     DefaultMaxRetries,
	}
}

// Merge returns a copy whose per-persona timeouts are replaced by overrides
// (typically ParsePersonaTimeoutsJSON's result). Non-positive values are
// ignored; d itself is not modified.
func (d PersonaDefaults) Merge(overrides map[string]time.Duration) PersonaDefaults {
	merged := maps.Clone(d.Timeouts)
	if merged == nil {
		merged = PersonaTimeouts{}
	}
	for name, t := range overrides {
		if t > 0 {
			merged[name] = t
		}
	}
	d.Timeouts = merged
	d.Coding = slices.Clone(d.Coding)
	return d
}

// Timeout returns the persona's attempt timeout (see the precedence above).
func (d PersonaDefaults) Timeout(persona string) time.Duration {
	if t := d.Timeouts[persona]; t > 0 {
		return t
	}
	if slices.Contains(d.Coding, persona) {
		return orDefault(d.CodingTimeout, DefaultCodingTimeout)
	}
	return orDefault(d.DefaultTimeout, DefaultPersonaTimeout)
}

// Policy returns the persona preset with the persona's timeout and retries.
func (d PersonaDefaults) Policy(persona string) Policy {
	p := PersonaPolicy(d.Timeout(persona))
	p.Persona = persona
	if d.MaxRetries > 0 {
		p.MaxAttempts = d.MaxRetries + 1
	}
	return p
}

func orDefault(d, def time.Duration) time.Duration {
	if d > 0 {
		return d
	}
	return def
}
