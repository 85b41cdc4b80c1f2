package retry_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/personaq/personaq/retry"
	"github.com/personaq/personaq/schemas"
)

// Retry policies per category: four presets with explicit maximum attempts
// and non-retryable error types, LLM calls under a different policy than
// deterministic work.
func TestRetryPolicies_FourPresets(t *testing.T) {
	t.Parallel()
	tests := []struct {
		preset       string
		attempts     int
		nonRetryable []string
	}{
		{"llm", 3, []string{"BadRequestError", "AuthenticationError", "PermissionDeniedError", "NotFoundError"}}, // the LLM call category
		{"local", 2, nil}, // deterministic local work
		{"git", 2, []string{"CommitError", "RepoDiscoveryError"}},          // git writes
		{"write", 2, []string{"OutputWriteError", "EditApplicationError"}}, // file writes
	}
	for _, tt := range tests {
		t.Run(tt.preset, func(t *testing.T) {
			t.Parallel()
			p, err := retry.Preset(tt.preset)
			require.NoError(t, err)
			require.NoError(t, p.Validate(), "an explicit policy with maximum_attempts")
			require.Equal(t, tt.attempts, p.MaxAttempts)
			require.Equal(t, tt.nonRetryable, p.NonRetryable)
		})
	}
}

// Non-retryable error types are matched like Temporal's
// non_retryable_error_types: the outermost error's simple type name
// (forge.git.CommitError is "CommitError"), exactly, and nothing further
// down the wrapped chain. A listed type ends retries after one attempt;
// "CommitError('Nothing to commit')" no longer retries forever.
func TestRetryPolicies_NonRetryableBySimpleTypeName(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		preset string
		types  []string
		want   retry.Action
	}{
		{"CommitErrorEndsGitRetries", "git", []string{"CommitError"}, retry.ActionQuarantine},
		{"RepoDiscoveryErrorEndsGitRetries", "git", []string{"RepoDiscoveryError", "PathError"}, retry.ActionQuarantine},
		{"BadRequestErrorEndsLLMRetries", "llm", []string{"BadRequestError"}, retry.ActionQuarantine},
		{"AuthenticationErrorEndsLLMRetries", "llm", []string{"AuthenticationError"}, retry.ActionQuarantine},
		{"OutputWriteErrorEndsWriteRetries", "write", []string{"OutputWriteError"}, retry.ActionQuarantine},
		{"QualifiedNameDoesNotMatch", "git", []string{"forge.git.CommitError"}, retry.ActionRetry},
		{"CaseMatters", "git", []string{"commitError"}, retry.ActionRetry},
		{"OnlyTheOutermostCounts", "git", []string{"ActivityError", "CommitError"}, retry.ActionRetry},
		{"RateLimitErrorIsRetried", "llm", []string{"RateLimitError"}, retry.ActionRetry},
		// remove_worktree runs under the local preset: a brief retry may succeed.
		{"WorktreeRemoveErrorRetriedUnderLocal", "local", []string{"WorktreeRemoveError"}, retry.ActionRetry},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p, err := retry.Preset(tt.preset)
			require.NoError(t, err)
			d := retry.Decide(retry.Input{Policy: p, Current: retry.Attempt{Number: 1, Class: retry.ClassRetryable,
				ErrorTypes: tt.types, Error: "Nothing to commit", Duration: time.Second}})
			require.Equal(t, tt.want, d.Action)
			if tt.want == retry.ActionQuarantine {
				require.Equal(t, schemas.ReasonTerminal, d.Reason)
				require.True(t, d.Blocked)
				require.Contains(t, d.Detail, "non-retryable error type "+tt.types[0])
			}
		})
	}
}
