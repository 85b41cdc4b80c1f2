package api_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/personaq/personaq/consumers"
	"github.com/personaq/personaq/consumers/wire"
	"github.com/personaq/personaq/handlers"
	"github.com/personaq/personaq/retry"
)

// waitsForCancel runs until its attempt's context ends and reports why.
func waitsForCancel(causes chan<- error) handlers.Handler {
	return handlers.Func(func(ctx context.Context, _ *handlers.Request) (handlers.Result, error) {
		<-ctx.Done()
		causes <- context.Cause(ctx)
		return handlers.Result{}, context.Cause(ctx)
	})
}

func TestCancelRequestRoute(t *testing.T) {
	t.Parallel()
	causes := make(chan error, 4)
	e := newEnv(t, consumers.Persona{Name: "hang", Handler: waitsForCancel(causes),
		Policy: retry.Policy{Name: "hang", MaxAttempts: 2, AttemptTimeout: time.Minute}})
	e.submit(map[string]any{"persona": "hang", "task_id": "wf-1", "request_id": "c-run"})
	require.Eventually(t, func() bool {
		st := e.do("GET", "/v1/requests/c-run", allToken, nil).json(t)
		return st["status"] == "running"
	}, 10*time.Second, 20*time.Millisecond)

	r := e.do("POST", "/v1/requests/c-run/cancel", allToken, map[string]any{"reason": "workflow cancelled"})
	require.Equal(t, http.StatusOK, r.code, "%s", r.body)
	st := r.json(t)
	require.Equal(t, "cancelled", st["status"])
	rec := st["record"].(map[string]any)
	require.Equal(t, "cancelled", rec["outcome"])
	require.Equal(t, "workflow cancelled", rec["detail"])
	require.Equal(t, "all", rec["cancelled_by"], "the token's name")
	select {
	case cause := <-causes:
		require.ErrorIs(t, cause, wire.ErrCancelled)
	case <-time.After(5 * time.Second):
		t.Fatal("the running attempt was not stopped")
	}
	got := e.awaitTerminal("c-run")
	require.Equal(t, "cancelled", got["status"])

	// Already ended: 409 with the record that won.
	r = e.do("POST", "/v1/requests/c-run/cancel", allToken, nil)
	require.Equal(t, http.StatusConflict, r.code, "%s", r.body)
	p := r.json(t)
	require.Equal(t, "urn:personaq:problem:conflict", p["type"])
	require.Equal(t, "cancelled", p["request"].(map[string]any)["record"].(map[string]any)["outcome"])

	e.submit(map[string]any{"persona": "echo", "task_id": "wf-1", "request_id": "c-done"})
	e.awaitTerminal("c-done")
	r = e.do("POST", "/v1/requests/c-done/cancel", allToken, map[string]any{"reason": "too late"})
	require.Equal(t, http.StatusConflict, r.code)
	require.Equal(t, "succeeded", r.json(t)["request"].(map[string]any)["record"].(map[string]any)["outcome"])

	r = e.do("POST", "/v1/requests/c-done/cancel", readToken, nil)
	require.Equal(t, http.StatusForbidden, r.code)
	require.Equal(t, "cancel", r.json(t)["scope"])
	require.Equal(t, http.StatusNotFound, e.do("POST", "/v1/requests/nope/cancel", allToken, nil).code)
}

func TestCancelTaskRoute(t *testing.T) {
	t.Parallel()
	causes := make(chan error, 8)
	e := newEnv(t, consumers.Persona{Name: "hang", Handler: waitsForCancel(causes),
		Policy: retry.Policy{Name: "hang", MaxAttempts: 2, AttemptTimeout: time.Minute}})
	for _, id := range []string{"t-a", "t-b"} {
		e.submit(map[string]any{"persona": "hang", "task_id": "wf-2", "request_id": id})
	}
	e.submit(map[string]any{"persona": "hang", "task_id": "wf-other", "request_id": "t-other"})
	r := e.do("POST", "/v1/tasks/wf-2/cancel", allToken, map[string]any{"reason": "workflow cancelled"})
	require.Equal(t, http.StatusOK, r.code, "%s", r.body)
	out := r.json(t)
	require.Equal(t, "wf-2", out["task_id"])
	require.Len(t, out["cancelled"], 2)
	require.Empty(t, out["already_ended"])
	for _, id := range []string{"t-a", "t-b"} {
		require.Equal(t, "cancelled", e.awaitTerminal(id)["status"])
	}
	st := e.do("GET", "/v1/requests/t-other", allToken, nil).json(t)
	require.NotEqual(t, "cancelled", st["status"], "another task's request is untouched")
	// stopped too, so that no handler still runs when the test ends
	require.Equal(t, http.StatusOK, e.do("POST", "/v1/requests/t-other/cancel", allToken, nil).code)
	e.awaitTerminal("t-other")
}
