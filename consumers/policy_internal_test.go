package consumers

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/personaq/personaq/consumers/wire"
	"github.com/personaq/personaq/schemas"
)

// Requests that override nothing share their persona's resolved policy,
// which is what RequestPolicy resolves for each; a request with overrides,
// a budget or another preset gets its own, and the shared one is left as
// it was.
func TestPolicyForSharesThePlainPolicy(t *testing.T) {
	t.Parallel()
	r := stageRuntime(t, nil, nil)
	p := r.personas["p"]
	plain := schemas.NewRequest("task-1", "main", "p")
	named := schemas.NewRequest("task-2", "main", "p")
	named.Policy = p.policy.Name

	a, err := r.policyFor(p, plain)
	require.NoError(t, err)
	b, err := r.policyFor(p, named)
	require.NoError(t, err)
	require.Same(t, a, b, "requests that override nothing share one policy")
	plainWant, err := wire.RequestPolicy(p.policy, plain, r.presets)
	require.NoError(t, err)
	require.Equal(t, plainWant, *a)

	overridden := schemas.NewRequest("task-3", "main", "p")
	overridden.PolicyOverrides = &schemas.PolicyOverrides{MaxAttempts: 7}
	budget := schemas.NewRequest("task-4", "main", "p")
	budget.Budget = &schemas.Budget{MaxTokens: 10}
	other := schemas.NewRequest("task-5", "main", "p")
	other.Policy = "llm"
	for _, req := range []*schemas.PersonaRequest{overridden, budget, other} {
		got, err := r.policyFor(p, req)
		require.NoError(t, err)
		require.NotSame(t, a, got)
		want, err := wire.RequestPolicy(p.policy, req, r.presets)
		require.NoError(t, err)
		require.Equal(t, want, *got)
	}
	again, err := r.policyFor(p, plain)
	require.NoError(t, err)
	require.Same(t, a, again)
	require.Equal(t, plainWant, *again, "the shared policy is unchanged by the others")
	require.NotEqual(t, 7, again.MaxAttempts)
}
