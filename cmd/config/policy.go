package config

import (
	"cmp"
	"fmt"
	"maps"
	"math"
	"reflect"
	"slices"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/personaq/personaq/retry"
)

// Schedule types.
const (
	ScheduleLinear      = "linear"
	ScheduleExponential = "exponential"
	ScheduleFixed       = "fixed"
	ScheduleList        = "list"
)

// PolicyConfig is a persona's retry policy: a preset name
//
//	policy: llm
//
// or a mapping that starts from a preset (Preset, or defaults.policy) and
// changes some of its fields:
//
//	policy:
//	  preset: llm
//	  max_attempts: 5
//	  schedule: {type: exponential, initial: 2s, coefficient: 2, maximum: 1m}
//
// The attempt timeout is the persona's timeout; AttemptTimeout is another
// way to write it.
type PolicyConfig struct {
	// Preset is the starting point. Default: defaults.policy.
	Preset string `yaml:"preset,omitempty"`
	// MaxAttempts counts attempts, the first included, 1 to 1000. Absent:
	// the preset's (for the persona preset, defaults.max_retries + 1); an
	// explicit 0 is an error, not "the preset's".
	MaxAttempts int `yaml:"max_attempts,omitempty"`
	// AttemptTimeout is the persona's timeout (set one of the two).
	AttemptTimeout Duration `yaml:"attempt_timeout,omitempty"`
	// Schedule replaces the preset's schedule.
	Schedule *ScheduleConfig `yaml:"schedule,omitempty"`
	// NonRetryable replaces the preset's list of error type names that end
	// retries at once.
	NonRetryable []string `yaml:"non_retryable,omitempty"`
	// NetworkDelay is the wait after a network failure. Default: the
	// preset's (60s).
	NetworkDelay Duration `yaml:"network_delay,omitempty"`
	// ValidationDelay is the wait after a validation failure. Default: the
	// preset's (0).
	ValidationDelay Duration `yaml:"validation_delay,omitempty"`
	// ProgressInterval is how often an attempt is asked to report progress
	// (adaptive retry's poll interval; doubled after an attempt whose
	// progress improved). Default: 30s.
	ProgressInterval Duration `yaml:"progress_interval,omitempty"`
	// Budget bounds the tokens and cost of all of a request's attempts
	// together; a request's own budget can only tighten it. Default: none.
	Budget *BudgetConfig `yaml:"budget,omitempty"`
	// QueueWait bounds how long a request may wait to start; one not
	// started within it ends unrun (deadline_exceeded, reason
	// queue_wait_exceeded). Default: none.
	QueueWait Duration `yaml:"queue_wait,omitempty"`

	// maxAttemptsSet: the mapping wrote max_attempts, even as 0.
	maxAttemptsSet bool
}

// Inline reports whether the policy changes anything of its preset.
func (p PolicyConfig) Inline() bool {
	return p.MaxAttempts != 0 || p.AttemptTimeout != 0 || p.Schedule != nil ||
		p.NonRetryable != nil || p.NetworkDelay != 0 || p.ValidationDelay != 0 || p.ProgressInterval != 0 ||
		p.Budget != nil || p.QueueWait != 0
}

// BudgetConfig is a policy's token and cost budget:
//
//	budget: {max_tokens: 200000, max_cost_usd: 2.5}
//
// When a failed attempt leaves too little for another one (what was spent
// plus as much as the largest attempt so far would exceed a limit), the
// request ends with reason budget_exhausted instead. A zero or absent limit
// sets none.
type BudgetConfig struct {
	// MaxTokens bounds input plus output tokens, as handlers report them.
	MaxTokens int64 `yaml:"max_tokens,omitempty"`
	// MaxCostUSD bounds the cost in US dollars, as handlers report it.
	MaxCostUSD float64 `yaml:"max_cost_usd,omitempty"`
}

// UnmarshalYAML decodes strictly: unknown keys are errors here too.
func (b *BudgetConfig) UnmarshalYAML(n *yaml.Node) error {
	type plain BudgetConfig
	return strictDecode(n, (*plain)(b))
}

// build returns the budget and adds the problems found below path.
func (b *BudgetConfig) build(path string, probs *problems) retry.UsageBudget {
	if b == nil {
		return retry.UsageBudget{}
	}
	nonNegative(probs, join(path, "max_tokens"), b.MaxTokens)
	if !(b.MaxCostUSD >= 0) || math.IsInf(b.MaxCostUSD, 1) {
		probs.add(join(path, "max_cost_usd"), "must be a non-negative number, got %g", b.MaxCostUSD)
	}
	return retry.UsageBudget{MaxTokens: b.MaxTokens, MaxCostUSD: b.MaxCostUSD}
}

// UnmarshalYAML accepts a preset name or a mapping.
func (p *PolicyConfig) UnmarshalYAML(n *yaml.Node) error {
	switch n.Kind {
	case yaml.ScalarNode:
		*p = PolicyConfig{Preset: n.Value}
		return nil
	case yaml.MappingNode:
	default:
		return lineErr(n, "want a preset name or a mapping")
	}
	type plain PolicyConfig // without this method
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == "max_attempts" {
			p.maxAttemptsSet = true
		}
	}
	return strictDecode(n, (*plain)(p))
}

// MarshalYAML writes a preset-only policy as its name.
func (p PolicyConfig) MarshalYAML() (any, error) {
	if !p.Inline() {
		return p.Preset, nil
	}
	type plain PolicyConfig
	return plain(p), nil
}

// ScheduleConfig is a retry schedule (see the retry package).
type ScheduleConfig struct {
	// Type is linear, exponential, fixed or list. Required.
	Type string `yaml:"type"`
	// linear: wait Step × n before retry n. Default: 30s.
	Step Duration `yaml:"step,omitempty"`
	// exponential: Initial × Coefficient^(n−1), capped at Maximum, ±Jitter
	// (a fraction). Defaults: 1s, 2, 100 × Initial, 0.
	Initial     Duration `yaml:"initial,omitempty"`
	Coefficient float64  `yaml:"coefficient,omitempty"`
	Maximum     Duration `yaml:"maximum,omitempty"`
	Jitter      float64  `yaml:"jitter,omitempty"`
	// fixed: the same wait before every retry. Required.
	Every Duration `yaml:"every,omitempty"`
	// list: the wait before retry n is Delays[n−1], the last repeating.
	// Required.
	Delays []Duration `yaml:"delays,omitempty"`
}

// UnmarshalYAML decodes strictly: unknown keys are errors here too.
func (s *ScheduleConfig) UnmarshalYAML(n *yaml.Node) error {
	type plain ScheduleConfig
	return strictDecode(n, (*plain)(s))
}

// build returns the retry.Schedule and the problems found, named below
// path.
func (s ScheduleConfig) build(path string, probs *problems) retry.Schedule {
	used := map[string][]string{
		ScheduleLinear:      {"step"},
		ScheduleExponential: {"initial", "coefficient", "maximum", "jitter"},
		ScheduleFixed:       {"every"},
		ScheduleList:        {"delays"},
	}
	set := map[string]bool{
		"step": s.Step != 0, "initial": s.Initial != 0, "coefficient": s.Coefficient != 0,
		"maximum": s.Maximum != 0, "jitter": s.Jitter != 0, "every": s.Every != 0, "delays": s.Delays != nil,
	}
	fields, ok := used[s.Type]
	if !ok {
		if s.Type == "" {
			probs.add(join(path, "type"), "required (linear, exponential, fixed or list)")
		} else {
			probs.add(join(path, "type"), "unknown schedule type %q (want linear, exponential, fixed or list)", s.Type)
		}
		return nil
	}
	for _, name := range slices.Sorted(maps.Keys(set)) {
		if set[name] && !slices.Contains(fields, name) {
			probs.add(join(path, name), "not used by schedule type %s", s.Type)
		}
	}
	switch s.Type {
	case ScheduleLinear:
		return retry.Linear{Step: cmp.Or(s.Step.Std(), retry.DefaultBackoffStep)}
	case ScheduleExponential:
		return retry.Exponential{Initial: cmp.Or(s.Initial.Std(), time.Second), Coefficient: s.Coefficient,
			Maximum: s.Maximum.Std(), Jitter: s.Jitter}
	case ScheduleFixed:
		if s.Every == 0 {
			probs.add(join(path, "every"), "required for schedule type fixed")
		}
		return retry.Fixed{Every: s.Every.Std()}
	}
	if len(s.Delays) == 0 {
		probs.add(join(path, "delays"), "required for schedule type list (at least one delay)")
	}
	delays := make([]time.Duration, len(s.Delays))
	for i, d := range s.Delays {
		delays[i] = d.Std()
	}
	return retry.List{Delays: delays}
}

// policy resolves persona name's retry.Policy: its preset, the inline
// changes, and its timeout as the attempt timeout. Problems are named below
// personas.<name>; the policy is only meaningful when none were added.
func (p *PersonaConfig) policy(name string, probs *problems) retry.Policy {
	path := "personas." + name + ".policy"
	pc := p.Policy
	pol, err := retry.Preset(pc.Preset)
	if err != nil {
		probs.add(join(path, "preset"), "unknown preset %q (known: %s)", pc.Preset, strings.Join(retry.PresetNames(), ", "))
		return retry.Policy{}
	}
	pol.Persona = name
	pol.AttemptTimeout = p.Timeout.Std()
	n := len(*probs)
	switch {
	case pc.maxAttemptsSet && pc.MaxAttempts == 0:
		probs.add(join(path, "max_attempts"), "must be in [1,%d], got 0 (leave it out for the preset's value)", retry.MaxAttemptsLimit)
	case pc.MaxAttempts < 0 || pc.MaxAttempts > retry.MaxAttemptsLimit:
		probs.add(join(path, "max_attempts"), "must be in [1,%d], got %d", retry.MaxAttemptsLimit, pc.MaxAttempts)
	case pc.MaxAttempts != 0:
		pol.MaxAttempts = pc.MaxAttempts
	case pol.Name == retry.PresetPersona && p.defaultMaxRetries != nil && *p.defaultMaxRetries >= 0: // defaults reports a bad one
		pol.MaxAttempts = *p.defaultMaxRetries + 1
	}
	if pc.Schedule != nil {
		pol.Schedule = pc.Schedule.build(join(path, "schedule"), probs)
	}
	for i, t := range pc.NonRetryable {
		if strings.TrimSpace(t) == "" {
			probs.add(fmt.Sprintf("%s.non_retryable[%d]", path, i), "must not be empty")
		}
	}
	if pc.NonRetryable != nil {
		pol.NonRetryable = slices.Clone(pc.NonRetryable)
	}
	nonNegative(probs, join(path, "network_delay"), pc.NetworkDelay)
	if pc.NetworkDelay != 0 {
		pol.NetworkDelay = pc.NetworkDelay.Std()
	}
	nonNegative(probs, join(path, "validation_delay"), pc.ValidationDelay)
	if pc.ValidationDelay != 0 {
		pol.ValidationDelay = pc.ValidationDelay.Std()
	}
	nonNegative(probs, join(path, "progress_interval"), pc.ProgressInterval)
	nonNegative(probs, join(path, "queue_wait"), pc.QueueWait)
	if pc.QueueWait != 0 {
		pol.QueueWait = pc.QueueWait.Std()
	}
	if pc.ProgressInterval != 0 {
		pol.ProgressInterval = pc.ProgressInterval.Std()
	}
	pol.UsageBudget = pc.Budget.build(join(path, "budget"), probs)
	if len(*probs) > n {
		return pol
	}
	// The rest (the schedule's own rules) is the retry package's to judge;
	// a bad timeout is reported as personas.<name>.timeout.
	check := pol
	check.AttemptTimeout = max(check.AttemptTimeout, 1)
	if err := check.Validate(); err != nil {
		probs.addErr(path, err, nil)
	}
	return pol
}

// strictDecode decodes mapping n into v, a pointer to a struct, reporting
// keys v has no field for. yaml.Node.Decode, which custom unmarshalers
// must use, does not inherit the file decoder's KnownFields(true); this
// puts the check back for the types that decode themselves.
func strictDecode(n *yaml.Node, v any) error {
	if n.Kind != yaml.MappingNode {
		return lineErr(n, "want a mapping")
	}
	known := yamlKeys(reflect.TypeOf(v).Elem())
	var errs []string
	for i := 0; i+1 < len(n.Content); i += 2 {
		if k := n.Content[i]; !slices.Contains(known, k.Value) {
			errs = append(errs, fmt.Sprintf("line %d: field %s not found", k.Line, k.Value))
		}
	}
	err := n.Decode(v)
	if te, ok := err.(*yaml.TypeError); ok {
		errs = append(errs, te.Errors...)
	} else if err != nil {
		return err
	}
	if len(errs) > 0 {
		return &yaml.TypeError{Errors: errs}
	}
	return nil
}

// yamlKeys lists the keys of a struct's yaml tags.
func yamlKeys(t reflect.Type) []string {
	keys := make([]string, 0, t.NumField())
	for f := range t.Fields() {
		if name, _, _ := strings.Cut(f.Tag.Get("yaml"), ","); name != "" && name != "-" {
			keys = append(keys, name)
		}
	}
	return keys
}
