package retry

import (
	"fmt"
	"strings"
	"time"
)

// Preset names. The first four are the retry policies' activity categories;
// persona is the persona request step and adaptive the adaptive-retry loop.
const (
	PresetLLM      = "llm"
	PresetLocal    = "local"
	PresetGit      = "git"
	PresetWrite    = "write"
	PresetPersona  = "persona"
	PresetAdaptive = "adaptive"
)

// Attempt timeouts of the category presets. The categories leave them to the
// caller; an LLM call can run for minutes, so it gets the persona fallback
// (10 min), while local, git and write work is expected to finish quickly.
const (
	DefaultLLMAttemptTimeout   = 10 * time.Minute
	DefaultLocalAttemptTimeout = 2 * time.Minute
)

// presets pairs each name with a constructor, so every call returns a fresh
// Policy whose slices callers may change without touching the preset.
var presets = []struct {
	name string
	make func() Policy
}{
	{PresetLLM, LLMPolicy},
	{PresetLocal, LocalPolicy},
	{PresetGit, GitPolicy},
	{PresetWrite, WritePolicy},
	{PresetPersona, func() Policy { return PersonaPolicy(DefaultPersonaTimeout) }},
	{PresetAdaptive, AdaptivePolicy},
}

// Preset returns the named preset. An unknown name yields an error wrapping
// ErrUnknownPreset that lists the known names.
func Preset(name string) (Policy, error) {
	for _, p := range presets {
		if p.name == name {
			return p.make(), nil
		}
	}
	return Policy{}, fmt.Errorf("%w %q (known: %s)", ErrUnknownPreset, name, strings.Join(PresetNames(), ", "))
}

// PresetNames lists the preset names in a stable order.
func PresetNames() []string {
	names := make([]string, len(presets))
	for i, p := range presets {
		names[i] = p.name
	}
	return names
}

// TemporalExponential is the schedule of the category presets: Temporal's
// default retry interval (1s, doubling, capped at 100s) with ±20% jitter so
// many failing workers do not retry in lockstep.
func TemporalExponential() Exponential {
	return Exponential{Initial: time.Second, Coefficient: 2, Maximum: 100 * time.Second, Jitter: 0.2}
}

// LLMPolicy is the LLM call category: 3 attempts; client errors that a
// retry cannot fix (400, 401, 403, 404) end it at once.
func LLMPolicy() Policy {
	return categoryPolicy(PresetLLM, 3, DefaultLLMAttemptTimeout,
		"BadRequestError", "AuthenticationError", "PermissionDeniedError", "NotFoundError")
}

// LocalPolicy is the local category: 2 attempts for deterministic work.
func LocalPolicy() Policy {
	return categoryPolicy(PresetLocal, 2, DefaultLocalAttemptTimeout)
}

// GitPolicy is the git category: 2 attempts; "nothing to commit" and a
// missing repository never heal on retry.
func GitPolicy() Policy {
	return categoryPolicy(PresetGit, 2, DefaultLocalAttemptTimeout, "CommitError", "RepoDiscoveryError")
}

// WritePolicy is the write category: 2 attempts for file writes.
func WritePolicy() Policy {
	return categoryPolicy(PresetWrite, 2, DefaultLocalAttemptTimeout, "OutputWriteError", "EditApplicationError")
}

func categoryPolicy(name string, attempts int, timeout time.Duration, nonRetryable ...string) Policy {
	return Policy{
		Name:           name,
		MaxAttempts:    attempts,
		AttemptTimeout: timeout,
		Schedule:       TemporalExponential(),
		NonRetryable:   nonRetryable,
	}.WithDefaults()
}

// PersonaPolicy is the persona request step: DefaultMaxRetries
// retries (4 attempts) after linear 30s, 60s, 90s waits, each attempt bounded
// by the persona's timeout. PersonaDefaults.Policy picks the timeout.
func PersonaPolicy(timeout time.Duration) Policy {
	return Policy{
		Name:           PresetPersona,
		MaxAttempts:    DefaultMaxRetries + 1,
		AttemptTimeout: timeout,
		Schedule:       Linear{Step: DefaultBackoffStep},
	}.WithDefaults()
}

// AdaptivePolicy is adaptive retry's dev-story loop: 5 attempts alternating
// primary and fallback agents, linear 30s steps. Its attempt timeout is the
// persona fallback (10 min) because a dev-story session is long work.
func AdaptivePolicy() Policy {
	return Policy{
		Name:           PresetAdaptive,
		MaxAttempts:    5,
		AttemptTimeout: DefaultPersonaTimeout,
		Schedule:       Linear{Step: DefaultBackoffStep},
	}.WithDefaults()
}
