package config

import (
	"maps"
	"slices"
	"strings"

	"github.com/personaq/personaq/consumers/flow"
)

// LimiterConfig is one shared rate limiter (limiters.<name>): a provider's
// limits for a model or an API key, enforced across every replica through
// Redis. Personas take permits from it with rate_limit.limiter.
type LimiterConfig struct {
	// RequestsPerMinute admitted across every replica. 0: no request limit.
	RequestsPerMinute int `yaml:"requests_per_minute,omitempty"`
	// TokensPerMinute admitted across every replica. 0: no token limit.
	TokensPerMinute int `yaml:"tokens_per_minute,omitempty"`
	// EstimatedTokens each request reserves before it starts. Default: 1000
	// with a token limit.
	EstimatedTokens int `yaml:"estimated_tokens,omitempty"`
	// Burst: requests that may start at once. Default: a second's worth
	// (requests_per_minute / 60, at least 1).
	Burst int `yaml:"burst,omitempty"`
	// TokenBurst: the same for tokens. Default: tokens_per_minute / 60, at
	// least estimated_tokens.
	TokenBurst int `yaml:"token_burst,omitempty"`
	// CoolDown after a 429 or 529 that names no wait. Default: 1s.
	CoolDown Duration `yaml:"cool_down,omitempty"`
}

func (l LimiterConfig) limit() flow.Limit {
	return flow.Limit{
		RequestsPerMinute: l.RequestsPerMinute, TokensPerMinute: l.TokensPerMinute,
		EstimatedTokens: l.EstimatedTokens, Burst: l.Burst, TokenBurst: l.TokenBurst, CoolDown: l.CoolDown.Std(),
	}
}

// RateLimitConfig names the limiter a persona's requests take permits
// from (personas.<name>.rate_limit).
type RateLimitConfig struct {
	// Limiter is a key of limiters. Required when rate_limit is set.
	Limiter string `yaml:"limiter,omitempty"`
}

// CircuitConfig is a persona's circuit breaker (personas.<name>.circuit,
// defaults.circuit).
type CircuitConfig struct {
	// Failures: the fewest provider failures (network errors, 5xx other
	// than 529, not counting answers that name a Retry-After) within the
	// last 30 s on one replica that open the circuit, provided that at
	// least 10 attempts were answered then and half of them failed
	// (flow.Circuit). Default: 5.
	Failures int `yaml:"failures,omitempty"`
	// CoolDown: how long an open circuit pauses the persona before one
	// probe is let through. Default: 30s.
	CoolDown Duration `yaml:"cool_down,omitempty"`
	// Disabled turns the breaker off. Default: false.
	Disabled bool `yaml:"disabled,omitempty"`
}

func (c CircuitConfig) circuit() flow.Circuit {
	if c.Disabled {
		return flow.Circuit{}
	}
	return flow.Circuit{Failures: c.Failures, CoolDown: c.CoolDown.Std()}
}

// Limits returns the configured limiters for flow.NewLimiter (nil: none).
func (f *File) Limits() map[string]flow.Limit {
	if len(f.Limiters) == 0 {
		return nil
	}
	out := make(map[string]flow.Limit, len(f.Limiters))
	for name, l := range f.Limiters {
		out[name] = l.limit()
	}
	return out
}

func (c *CircuitConfig) applyDefaults(def CircuitConfig) {
	orInt(&c.Failures, def.Failures)
	orDur(&c.CoolDown, def.CoolDown.Std())
}

func (f *File) validateFlow(probs *problems) {
	for _, name := range slices.Sorted(maps.Keys(f.Limiters)) {
		path := "limiters." + name
		if !flow.ValidName(name) {
			probs.add(path, "limiter names use letters, digits, '.', ':', '-' and '_', got %q", name)
		}
		if err := f.Limiters[name].limit().WithDefaults().Validate(); err != nil {
			probs.add(path, "%s", strings.TrimPrefix(err.Error(), flow.ErrInvalidConfig.Error()+": "))
		}
	}
	nonNegative(probs, "defaults.circuit.failures", f.Defaults.Circuit.Failures)
	nonNegative(probs, "defaults.circuit.cool_down", f.Defaults.Circuit.CoolDown)
	for _, name := range slices.Sorted(maps.Keys(f.PersonaConfigs)) {
		p := f.PersonaConfigs[name]
		path := "personas." + name
		if l := p.RateLimit.Limiter; l != "" {
			if _, ok := f.Limiters[l]; !ok {
				probs.add(join(path, "rate_limit.limiter"), "unknown limiter %q (known: %s)", l, orNoneList(slices.Sorted(maps.Keys(f.Limiters))))
			}
		}
		nonNegative(probs, join(path, "circuit.failures"), p.Circuit.Failures)
		nonNegative(probs, join(path, "circuit.cool_down"), p.Circuit.CoolDown)
	}
}

func orNoneList(names []string) string {
	if len(names) == 0 {
		return "none: define it under limiters"
	}
	return strings.Join(names, ", ")
}
