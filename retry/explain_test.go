package retry_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"

	"github.com/personaq/personaq/retry"
)

func TestExplainPersonaDefaults(t *testing.T) {
	t.Parallel()
	got := retry.Explain(retry.NewPersonaDefaults().Policy("context"))
	want := retry.Explanation{
		Policy: "persona", Persona: "context", MaxAttempts: 4, MaxRetries: 3, AttemptTimeoutMs: 60000,
		Schedule: "linear step=30s",
		Retries: []retry.RetryRow{
			{Retry: 1, Attempt: 2, BackoffMs: 30000, MinBackoffMs: 30000, BackoffSeconds: 30, AgentRole: retry.RoleFallback},
			{Retry: 2, Attempt: 3, BackoffMs: 60000, MinBackoffMs: 60000, BackoffSeconds: 60, AgentRole: retry.RolePrimary},
			{Retry: 3, Attempt: 4, BackoffMs: 90000, MinBackoffMs: 90000, BackoffSeconds: 90, AgentRole: retry.RoleFallback},
		},
		NonRetryable:   []string{},
		NetworkDelayMs: 60000, TotalBackoffMs: 180000, BufferMs: 30000,
		StepDeadlineMs: 450000, StepDeadlineMinutes: 7.5, WorstCaseDeadlineMs: 540000,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("(-want +got):\n%s", diff)
	}
}

func TestExplainJSON(t *testing.T) {
	t.Parallel()
	p, err := retry.Preset(retry.PresetGit)
	require.NoError(t, err)
	raw, err := json.Marshal(retry.Explain(p))
	require.NoError(t, err)
	for _, fragment := range []string{
		`"policy":"git"`, `"maxAttempts":2`, `"maxRetries":1`, `"attemptTimeoutMs":120000`,
		`"retries":[{"retry":1,"attempt":2,"backoffMs":1200,"minBackoffMs":800,"backoffSeconds":1.2,"agentRole":"fallback"}]`,
		`"nonRetryable":["CommitError","RepoDiscoveryError"]`, `"networkDelayMs":60000`,
		`"stepDeadlineMs":271200`,
	} {
		require.Contains(t, string(raw), fragment)
	}
	require.NotContains(t, string(raw), `"persona"`, "persona is omitted when empty")
	require.NotContains(t, string(raw), `"invalid"`)
}

func TestExplainInvalidPolicy(t *testing.T) {
	t.Parallel()
	e := retry.Explain(retry.Policy{Name: "broken", MaxAttempts: 2})
	require.Contains(t, e.Invalid, "attempt_timeout")
	var sb strings.Builder
	require.NoError(t, e.WriteText(&sb))
	require.Contains(t, sb.String(), "INVALID")
}

func TestExplainWriteText(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		policy retry.Policy
		want   []string
	}{
		{"DefaultContext", retry.NewPersonaDefaults().Policy("context"), []string{
			"persona          context\n",
			"max attempts     4 (3 retries)\n",
			"retry  attempt  agent (with fallback)  backoff\n",
			"3      4        fallback               1m30s\n",
			"step deadline  7m30s = 4 × 1m0s + 3m0s backoff + 30s buffer\n",
			"Calculated PersonaRequestStep timeout to accommodate retries: persona=context personaTimeoutMs=60000 " +
				"personaTimeoutMinutes=1.00 maxRetries=3 totalBackoffMs=180000 totalBackoffMinutes=3.00 " +
				"calculatedTimeout=450000 calculatedTimeoutMinutes=7.50\n",
		}},
		{"JitterShowsRange", retry.LLMPolicy(), []string{
			"non-retryable    BadRequestError, AuthenticationError, PermissionDeniedError, NotFoundError\n",
			"800ms–1.2s (jitter)",
		}},
		{"NoRetries", retry.Policy{Name: "once", MaxAttempts: 1, AttemptTimeout: time.Minute}, []string{
			"no retries: the first failure is final\n",
			"non-retryable    none\n",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var sb strings.Builder
			require.NoError(t, retry.Explain(tt.policy).WriteText(&sb))
			for _, w := range tt.want {
				require.Contains(t, sb.String(), w)
			}
		})
	}
}

// failingWriter fails every write after the first n bytes.
type failingWriter struct{ n int }

var errDiskFull = errors.New("disk full")

func (f *failingWriter) Write(p []byte) (int, error) {
	if len(p) > f.n {
		return 0, errDiskFull
	}
	f.n -= len(p)
	return len(p), nil
}

func TestExplainWriteTextReportsWriteErrors(t *testing.T) {
	t.Parallel()
	e := retry.Explain(retry.NewPersonaDefaults().Policy("planner"))
	for _, n := range []int{0, 100, 500} {
		require.ErrorIs(t, e.WriteText(&failingWriter{n: n}), errDiskFull, "after %d bytes", n)
	}
}
