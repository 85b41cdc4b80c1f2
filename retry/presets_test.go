package retry_test

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"

	"github.com/personaq/personaq/retry"
)

func TestPresets(t *testing.T) {
	t.Parallel()
	temporal := retry.Exponential{Initial: time.Second, Coefficient: 2, Maximum: 100 * time.Second, Jitter: 0.2}
	linear := retry.Linear{Step: 30 * time.Second}
	category := func(name string, attempts int, timeout time.Duration, nonRetryable ...string) retry.Policy {
		return retry.Policy{Name: name, MaxAttempts: attempts, AttemptTimeout: timeout, Schedule: temporal,
			NonRetryable: nonRetryable, NetworkDelay: time.Minute, ExtendedTimeoutFactor: 2, ProgressInterval: 30 * time.Second}
	}
	tests := []struct {
		name string
		want retry.Policy
	}{
		{"llm", category("llm", 3, 10*time.Minute,
			"BadRequestError", "AuthenticationError", "PermissionDeniedError", "NotFoundError")},
		{"local", category("local", 2, 2*time.Minute)},
		{"git", category("git", 2, 2*time.Minute, "CommitError", "RepoDiscoveryError")},
		{"write", category("write", 2, 2*time.Minute, "OutputWriteError", "EditApplicationError")},
		{"persona", retry.Policy{Name: "persona", MaxAttempts: 4, AttemptTimeout: 10 * time.Minute,
			Schedule: linear, NetworkDelay: time.Minute, ExtendedTimeoutFactor: 2, ProgressInterval: 30 * time.Second}},
		{"adaptive", retry.Policy{Name: "adaptive", MaxAttempts: 5, AttemptTimeout: 10 * time.Minute,
			Schedule: linear, NetworkDelay: time.Minute, ExtendedTimeoutFactor: 2, ProgressInterval: 30 * time.Second}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := retry.Preset(tt.name)
			require.NoError(t, err)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Fatalf("(-want +got):\n%s", diff)
			}
			require.NoError(t, got.Validate())
		})
	}
}

func TestPresetNames(t *testing.T) {
	t.Parallel()
	require.Equal(t, []string{"llm", "local", "git", "write", "persona", "adaptive"}, retry.PresetNames())
	names := retry.PresetNames()
	names[0] = "changed"
	require.Equal(t, "llm", retry.PresetNames()[0], "PresetNames must return a copy")
}

func TestPresetUnknown(t *testing.T) {
	t.Parallel()
	_, err := retry.Preset("LLM")
	require.ErrorIs(t, err, retry.ErrUnknownPreset)
	require.EqualError(t, err, `unknown policy preset "LLM" (known: llm, local, git, write, persona, adaptive)`)
}

func TestPresetIsFresh(t *testing.T) {
	t.Parallel()
	p, err := retry.Preset(retry.PresetGit)
	require.NoError(t, err)
	p.NonRetryable[0] = "changed"
	again, err := retry.Preset(retry.PresetGit)
	require.NoError(t, err)
	require.Equal(t, "CommitError", again.NonRetryable[0])
}
