package retry_test

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/personaq/personaq/retry"
)

func validPolicy() retry.Policy {
	return retry.Policy{Name: "test", MaxAttempts: 3, AttemptTimeout: time.Minute}
}

func TestPolicyValidate(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		change    func(*retry.Policy)
		wantField string // empty: valid
	}{
		{"Valid", func(*retry.Policy) {}, ""},
		{"ValidWithDefaults", func(p *retry.Policy) { *p = p.WithDefaults() }, ""},
		{"ZeroMaxAttempts", func(p *retry.Policy) { p.MaxAttempts = 0 }, "max_attempts"},
		{"TooManyAttempts", func(p *retry.Policy) { p.MaxAttempts = retry.MaxAttemptsLimit + 1 }, "max_attempts"},
		{"ZeroAttemptTimeout", func(p *retry.Policy) { p.AttemptTimeout = 0 }, "attempt_timeout"},
		{"NegativeAttemptTimeout", func(p *retry.Policy) { p.AttemptTimeout = -time.Second }, "attempt_timeout"},
		{"NegativeNetworkDelay", func(p *retry.Policy) { p.NetworkDelay = -time.Second }, "network_delay"},
		{"NegativeValidationDelay", func(p *retry.Policy) { p.ValidationDelay = -time.Second }, "validation_delay"},
		{"ShrinkingExtendedTimeout", func(p *retry.Policy) { p.ExtendedTimeoutFactor = 0.5 }, "extended_timeout_factor"},
		{"NaNExtendedTimeout", func(p *retry.Policy) { p.ExtendedTimeoutFactor = math.NaN() }, "extended_timeout_factor"},
		{"EmptyNonRetryableName", func(p *retry.Policy) { p.NonRetryable = []string{"CommitError", " "} }, "non_retryable[1]"},
		{"NegativeLinearStep", func(p *retry.Policy) { p.Schedule = retry.Linear{Step: -time.Second} }, "schedule.step"},
		{"NegativeFixed", func(p *retry.Policy) { p.Schedule = retry.Fixed{Every: -time.Second} }, "schedule.every"},
		{"NegativeListEntry", func(p *retry.Policy) {
			p.Schedule = retry.List{Delays: []time.Duration{time.Second, -time.Second}}
		}, "schedule.delays[1]"},
		{"NegativeInitial", func(p *retry.Policy) { p.Schedule = retry.Exponential{Initial: -time.Second} }, "schedule.initial"},
		{"ShrinkingCoefficient", func(p *retry.Policy) {
			p.Schedule = retry.Exponential{Initial: time.Second, Coefficient: 0.5}
		}, "schedule.coefficient"},
		{"MaximumBelowInitial", func(p *retry.Policy) {
			p.Schedule = retry.Exponential{Initial: time.Minute, Maximum: time.Second}
		}, "schedule.maximum"},
		{"JitterAboveOne", func(p *retry.Policy) {
			p.Schedule = retry.Exponential{Initial: time.Second, Jitter: 1.5}
		}, "schedule.jitter"},
		{"NegativeJitter", func(p *retry.Policy) {
			p.Schedule = retry.Exponential{Initial: time.Second, Jitter: -0.1}
		}, "schedule.jitter"},
		{"CustomScheduleNotChecked", func(p *retry.Policy) {
			p.Schedule = scheduleFunc(func(int) time.Duration { return -1 })
		}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p := validPolicy()
			tt.change(&p)
			err := p.Validate()
			if tt.wantField == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, retry.ErrInvalidPolicy)
			require.Contains(t, err.Error(), tt.wantField+":")
		})
	}
}

func TestPolicyWithDefaults(t *testing.T) {
	t.Parallel()
	p := retry.Policy{MaxAttempts: 2, AttemptTimeout: time.Minute}.WithDefaults()
	require.Equal(t, retry.Linear{Step: 30 * time.Second}, p.Schedule)
	require.Equal(t, 60*time.Second, p.NetworkDelay)
	require.Equal(t, 0*time.Second, p.ValidationDelay)
	require.InDelta(t, 2.0, p.ExtendedTimeoutFactor, 0)
}

func TestPolicyIsNonRetryable(t *testing.T) {
	t.Parallel()
	p := retry.GitPolicy()
	tests := []struct {
		name  string
		types []string
		want  bool
	}{
		{"Listed", []string{"CommitError"}, true},
		{"OutermostOnly", []string{"ActivityError", "RepoDiscoveryError"}, false}, // as in Temporal
		{"OutermostListed", []string{"RepoDiscoveryError", "PathError"}, true},
		{"SimpleNameOnly", []string{"forge.git.CommitError"}, false},
		{"CaseSensitive", []string{"commiterror"}, false},
		{"None", nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tt.want, p.IsNonRetryable(tt.types))
		})
	}
}

func TestPolicyMaxRetries(t *testing.T) {
	t.Parallel()
	for attempts, want := range map[int]int{0: 0, 1: 0, 4: 3} {
		require.Equal(t, want, retry.Policy{MaxAttempts: attempts}.MaxRetries())
	}
}

// A policy problem names its field as data: callers report it under their
// own path with errors.As, never by reading the text.
func TestValidateReturnsAFieldError(t *testing.T) {
	t.Parallel()
	p := retry.Policy{MaxAttempts: 0}
	var fe *retry.FieldError
	require.ErrorAs(t, p.Validate(), &fe)
	require.ErrorIs(t, fe, retry.ErrInvalidPolicy)
	require.NotEmpty(t, fe.Field)
	require.NotContains(t, fe.Message, fe.Field+":", "the message does not repeat the field")
}
