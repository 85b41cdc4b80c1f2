package retry

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// Defaults applied by Policy.WithDefaults.
const (
	DefaultNetworkDelay          = 60 * time.Second
	DefaultExtendedTimeoutFactor = 2.0
	// DefaultProgressInterval is how often a persona is asked to report
	// progress (adaptive retry's poll interval).
	DefaultProgressInterval = 30 * time.Second
	// MaxAttemptsLimit bounds MaxAttempts: a budget lists one backoff per
	// retry, and a persona step that needs more attempts needs a person.
	MaxAttemptsLimit = 1000
)

// Policy is the explicit retry policy every persona call runs under.
type Policy struct {
	// Name identifies the policy in logs and records.
	Name string
	// Persona is the persona the policy was resolved for (PersonaDefaults),
	// if any. Informational: logs, budgets and explanations show it.
	Persona string
	// MaxAttempts counts handler invocations, first included. Required (≥1).
	MaxAttempts int
	// AttemptTimeout bounds one handler invocation. Required.
	AttemptTimeout time.Duration
	// Schedule gives the delay before each retry. Default: Linear{30s}.
	Schedule Schedule
	// NonRetryable lists simple error type names that end retries at once
	// (Temporal's non_retryable_error_types). Like Temporal, only the
	// outermost error's type name is compared (Attempt.ErrorTypes[0]), exactly.
	NonRetryable []string
	// NetworkDelay is the wait after a network failure. Default: 60s.
	NetworkDelay time.Duration
	// NetworkCountsTowardPlateau lets network failures take part in plateau
	// detection. Default: false (adaptive retry).
	NetworkCountsTowardPlateau bool
	// ValidationDelay is the wait after a validation failure. Default: 0
	// (retry with feedback: validation retries are fast).
	ValidationDelay time.Duration
	// ExtendedTimeoutFactor multiplies AttemptTimeout for the last attempt
	// when progress has been variable (adaptive retry). Default: 2.
	ExtendedTimeoutFactor float64
	// ProgressInterval is how often an attempt is asked to report its
	// progress (the built-in invokers hand it to the persona). It doubles
	// for the attempt after one whose progress improved (adaptive retry's
	// "2x poll interval"; see ProgressIntervalFor). Default: 30s.
	ProgressInterval time.Duration
	// UsageBudget bounds the tokens and cost of all of a request's attempts
	// together: a failed attempt after which another would overspend it
	// ends the request with schemas.ReasonBudgetExhausted. Default: no limit.
	UsageBudget UsageBudget
	// QueueWait bounds how long a request may wait to start (Temporal's
	// schedule-to-start timeout): one not started within it, counted from
	// its created_at, ends unrun as deadline_exceeded with reason
	// queue_wait_exceeded, so its caller can fall back instead of waiting
	// behind a backlog or an open circuit. Default: 0, no bound.
	QueueWait time.Duration
}

// WithDefaults returns p with zero optional fields set to their defaults.
func (p Policy) WithDefaults() Policy {
	if p.Schedule == nil {
		p.Schedule = DefaultSchedule()
	}
	if p.NetworkDelay == 0 {
		p.NetworkDelay = DefaultNetworkDelay
	}
	if p.ExtendedTimeoutFactor == 0 {
		p.ExtendedTimeoutFactor = DefaultExtendedTimeoutFactor
	}
	if p.ProgressInterval == 0 {
		p.ProgressInterval = DefaultProgressInterval
	}
	return p
}

// Validate reports the first invalid field, wrapped in ErrInvalidPolicy:
// the policy's own fields, then its non-retryable names, then the schedule
// (when it can validate itself).
func (p Policy) Validate() error {
	if err := p.validateFields(); err != nil {
		return err
	}
	for i, name := range p.NonRetryable {
		if strings.TrimSpace(name) == "" {
			return fieldErr(fmt.Sprintf("non_retryable[%d]", i), "must not be empty")
		}
	}
	if v, ok := p.Schedule.(scheduleValidator); ok {
		return v.Validate()
	}
	return nil
}

func (p Policy) validateFields() error {
	switch {
	case p.MaxAttempts < 1 || p.MaxAttempts > MaxAttemptsLimit:
		return fieldErr("max_attempts", "must be in [1,%d], got %d", MaxAttemptsLimit, p.MaxAttempts)
	case p.AttemptTimeout <= 0:
		return fieldErr("attempt_timeout", "must be positive, got %s", p.AttemptTimeout)
	case p.NetworkDelay < 0:
		return fieldErr("network_delay", "must not be negative, got %s", p.NetworkDelay)
	case p.ValidationDelay < 0:
		return fieldErr("validation_delay", "must not be negative, got %s", p.ValidationDelay)
	case p.ExtendedTimeoutFactor != 0 && !(p.ExtendedTimeoutFactor >= 1):
		return fieldErr("extended_timeout_factor", "must be at least 1, got %g", p.ExtendedTimeoutFactor)
	case p.ProgressInterval < 0:
		return fieldErr("progress_interval", "must not be negative, got %s", p.ProgressInterval)
	}
	return p.UsageBudget.Validate()
}

// MaxRetries is MaxAttempts − 1 (the step budget's maxRetries).
func (p Policy) MaxRetries() int { return max(p.MaxAttempts-1, 0) }

// IsNonRetryable reports whether the outermost error's type name
// (typeNames[0], as Attempt.ErrorTypes lists them) is listed in
// NonRetryable. As in Temporal, a type further down the wrapped chain does
// not count, and names are simple type names compared exactly.
func (p Policy) IsNonRetryable(typeNames []string) bool {
	_, ok := p.nonRetryableMatch(typeNames)
	return ok
}

// nonRetryableMatch returns the outermost type name when NonRetryable
// lists it.
func (p Policy) nonRetryableMatch(typeNames []string) (string, bool) {
	if len(typeNames) > 0 && slices.Contains(p.NonRetryable, typeNames[0]) {
		return typeNames[0], true
	}
	return "", false
}

func fieldErr(field, format string, args ...any) error {
	return &FieldError{Err: ErrInvalidPolicy, Field: field, Message: fmt.Sprintf(format, args...)}
}
