package consumers_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/personaq/personaq/consumers"
	"github.com/personaq/personaq/consumers/saga"
	"github.com/personaq/personaq/handlers"
	"github.com/personaq/personaq/schemas"
)

// A replica with compensation handlers runs compensation requests
// continuously: a transient failure is retried through redelivery and
// compensates, a terminal one quarantines its saga.
func TestRuntimeRunsCompensations(t *testing.T) {
	t.Parallel()
	h := newHarness(t, false)
	var tries int
	deleteBranch := func(_ context.Context, req *schemas.CompensationRequest) error {
		if req.Target == "main" {
			return handlers.Terminal(errors.New("protected branch"))
		}
		if tries++; tries == 1 {
			return handlers.Retryable(errors.New("index.lock exists"))
		}
		return nil
	}
	h.startMod(func(c *consumers.Config) {
		c.Compensations = map[schemas.CompensationKind]saga.Func{schemas.CompensationDeleteBranch: deleteBranch}
	}, persona("echo", handlers.Func(func(context.Context, *handlers.Request) (handlers.Result, error) {
		return handlers.Result{}, nil
	}), fastPolicy(1)))

	for _, target := range []string{"loop/1", "main"} {
		req := &schemas.CompensationRequest{SchemaVersion: schemas.Version, RequestID: "req-" + target, SagaID: "saga-" + target,
			Kind: schemas.CompensationDeleteBranch, Target: target, CreatedAt: time.Now().UTC()}
		_, _, err := saga.Publish(context.Background(), h.js, saga.Topology{}, req)
		require.NoError(t, err)
	}
	state := func(id string) saga.State {
		sg, err := saga.Get(context.Background(), h.js, saga.Topology{}, id)
		if err != nil {
			return ""
		}
		return sg.State
	}
	require.Eventually(t, func() bool {
		return state("saga-loop/1") == saga.Compensated && state("saga-main") == saga.Quarantined
	}, 15*time.Second, 20*time.Millisecond)
	sg, err := saga.Get(context.Background(), h.js, saga.Topology{}, "saga-loop/1")
	require.NoError(t, err)
	require.Equal(t, 2, sg.Attempts)
	require.Len(t, sg.Errors, 1)
}
