package client_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/personaq/personaq/consumers"
	"github.com/personaq/personaq/consumers/client"
	"github.com/personaq/personaq/consumers/wire"
	"github.com/personaq/personaq/handlers"
	"github.com/personaq/personaq/schemas"
)

// waitsForCancel runs until its attempt's context ends.
var waitsForCancel = handlers.Func(func(ctx context.Context, _ *handlers.Request) (handlers.Result, error) {
	<-ctx.Done()
	return handlers.Result{}, context.Cause(ctx)
})

// Run returns an error matching ErrCancelled, with the record, when the
// request is cancelled while it runs.
func TestRunReturnsErrCancelled(t *testing.T) {
	t.Parallel()
	e := newEnv(t, true)
	e.serve(consumers.Config{}, consumers.Persona{Name: "slow", Handler: waitsForCancel, Policy: policy(2, 30*time.Second)})
	req := schemas.NewRequest("wf-1", "plan", "slow")
	errc := make(chan error, 1)
	go func() {
		_, err := e.c.Run(context.Background(), req)
		errc <- err
	}()
	var rec *schemas.OutcomeEvent
	require.Eventually(t, func() bool {
		var err error
		rec, err = e.c.Cancel(context.Background(), req.RequestID, "workflow cancelled", client.CancelledBy("orchestrator"))
		return err == nil
	}, 10*time.Second, 50*time.Millisecond)
	require.Equal(t, schemas.OutcomeCancelled, rec.Outcome)
	require.Equal(t, "plan", rec.Step)
	var err error
	select {
	case err = <-errc:
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return")
	}
	require.ErrorIs(t, err, client.ErrCancelled)
	var stopped *client.StoppedError
	require.True(t, errors.As(err, &stopped))
	require.Equal(t, "orchestrator", stopped.Record.CancelledBy)
	require.Equal(t, "workflow cancelled", stopped.Record.Detail)
	require.NotErrorIs(t, err, client.ErrBlocked)

	_, err = e.c.Cancel(context.Background(), req.RequestID, "again")
	require.ErrorIs(t, err, client.ErrAlreadyEnded)
	_, err = e.c.Cancel(context.Background(), "no-such-request", "x")
	require.ErrorIs(t, err, client.ErrUnknownRequest)
}

// CancelTask cancels every open request of a task, across personas, and
// leaves other tasks alone.
func TestCancelTaskAcrossPersonas(t *testing.T) {
	t.Parallel()
	e := newEnv(t, true)
	ctx := context.Background()
	require.NoError(t, consumers.Provision(ctx, e.js, wire.Topology{}, nil))
	var mine []*schemas.PersonaRequest
	for _, p := range []string{"planner", "coder", "tester"} {
		for range 3 {
			req := schemas.NewRequest("wf-cancelled", "s", p)
			_, err := e.c.Submit(ctx, req, client.SkipPersonaCheck())
			require.NoError(t, err)
			mine = append(mine, req)
		}
	}
	other := schemas.NewRequest("wf-other", "s", "planner")
	_, err := e.c.Submit(ctx, other, client.SkipPersonaCheck())
	require.NoError(t, err)
	// one request of the task ended before the cancel
	done := schemas.NewRequest("wf-cancelled", "done", "planner")
	_, err = e.c.Submit(ctx, done, client.SkipPersonaCheck())
	require.NoError(t, err)
	_, err = wire.Cancel(ctx, e.js, wire.Topology{}, wire.CancellationOf(done, "earlier", "test"))
	require.NoError(t, err)

	res, err := e.c.CancelTask(ctx, "wf-cancelled", "workflow cancelled", client.CancelledBy("cli"))
	require.NoError(t, err)
	require.Len(t, res.Cancelled, len(mine))
	require.Len(t, res.AlreadyEnded, 1)
	for _, req := range mine {
		_, err := e.c.Await(ctx, req.RequestID)
		require.ErrorIs(t, err, client.ErrCancelled)
	}
	_, err = e.c.Record(ctx, other.RequestID)
	require.ErrorIs(t, err, wire.ErrNoOutcome, "another task's request is untouched")

	// the replicas that start later run none of them
	var runs = make(chan string, 16)
	count := handlers.Func(func(_ context.Context, r *handlers.Request) (handlers.Result, error) {
		runs <- r.Message.TaskID
		return handlers.Result{Output: []byte(`1`)}, nil
	})
	e.serve(consumers.Config{}, consumers.Persona{Name: "planner", Handler: count, Policy: policy(2, time.Second)},
		consumers.Persona{Name: "coder", Handler: count, Policy: policy(2, time.Second)},
		consumers.Persona{Name: "tester", Handler: count, Policy: policy(2, time.Second)})
	_, err = e.c.Await(ctx, other.RequestID)
	require.NoError(t, err)
	require.Eventually(t, func() bool { return e.requestsLeft() == 0 }, 10*time.Second, 20*time.Millisecond)
	require.Len(t, runs, 1)
	require.Equal(t, "wf-other", <-runs)
}

// requestsLeft is how many requests are not settled yet.
func (e *env) requestsLeft() uint64 {
	e.t.Helper()
	n, err := consumers.Unsettled(context.Background(), e.js, wire.Topology{})
	require.NoError(e.t, err)
	return n
}
