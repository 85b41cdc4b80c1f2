package api_test

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/personaq/personaq/consumers"
	"github.com/personaq/personaq/handlers"
	"github.com/personaq/personaq/retry"
)

// TestEveryStatus: GET /v1/requests/{id} answers each status the API
// names — queued, running, retrying, and every terminal outcome — for a
// request really in that state, with the record once terminal. (deferred
// needs the attempt ledger, which this harness runs without, to confirm a
// plateau across agents: the clients' suites, against `personaq dev`,
// cover it.)
func TestEveryStatus(t *testing.T) {
	t.Parallel()
	started := make(chan struct{}, 4)
	gated := consumers.Persona{Name: "gated", Concurrency: 1, Policy: scaled(retry.PersonaPolicy(time.Minute)),
		Handler: handlers.Func(func(ctx context.Context, _ *handlers.Request) (handlers.Result, error) {
			started <- struct{}{}
			<-ctx.Done() // runs until cancelled: its one slot stays busy
			return handlers.Result{}, context.Cause(ctx)
		})}
	gated.Policy.AttemptTimeout = time.Minute
	backoff := scaled(retry.PersonaPolicy(time.Minute))
	backoff.Schedule = retry.Fixed{Every: time.Minute} // the retry waits long enough to be seen
	failing := consumers.Persona{Name: "failing", Policy: backoff, Handler: handlers.Func(
		func(context.Context, *handlers.Request) (handlers.Result, error) {
			return handlers.Result{}, handlers.Retryable(errors.New("provider overloaded"))
		})}
	e := newEnv(t, gated, failing)
	statusOf := func(id string) map[string]any {
		t.Helper()
		r := e.do("GET", "/v1/requests/"+id, readToken, nil)
		require.Equal(t, http.StatusOK, r.code, "%s", r.body)
		return r.json(t)
	}
	eventually := func(id, want string) map[string]any {
		t.Helper()
		var st map[string]any
		require.Eventually(t, func() bool { st = statusOf(id); return st["status"] == want }, 20*time.Second, 20*time.Millisecond,
			"%s never became %s", id, want)
		return st
	}

	running := e.submit(map[string]any{"persona": "gated", "task_id": "t-status", "step": "running"})["request_id"].(string)
	<-started
	queued := e.submit(map[string]any{"persona": "gated", "task_id": "t-status", "step": "queued"})["request_id"].(string)
	retrying := e.submit(map[string]any{"persona": "failing", "task_id": "t-status", "step": "retrying"})["request_id"].(string)

	st := eventually(running, "running")
	require.EqualValues(t, 1, st["attempts"])
	require.Nil(t, st["record"])
	st = eventually(queued, "queued")
	require.EqualValues(t, 0, st["attempts"])
	require.Nil(t, st["record"])
	st = eventually(retrying, "retrying")
	require.Equal(t, "provider overloaded", st["last_error"])
	require.NotEmpty(t, st["next_attempt_at"], "a retrying request says when its next attempt is due")
	require.Nil(t, st["record"])

	terminal := map[string]map[string]any{
		"succeeded":         {"persona": "echo"},
		"quarantined":       {"persona": "terminal"},
		"escalated":         {"persona": "slowpoke", "progress_total": 9}, // never reports progress
		"deadline_exceeded": {"persona": "slowpoke", "deadline": time.Now().Add(time.Second).UTC().Format(time.RFC3339Nano)},
	}
	ids := map[string]string{}
	for outcome, body := range terminal {
		body["task_id"], body["step"] = "t-status", outcome
		ids[outcome] = e.submit(body)["request_id"].(string)
	}
	r := e.do("POST", "/v1/requests/"+queued+"/cancel", allToken, map[string]any{"reason": "status test"})
	require.Equal(t, http.StatusOK, r.code, "%s", r.body)
	ids["cancelled"] = queued
	for outcome, id := range ids {
		st := e.awaitTerminal(id)
		require.Equal(t, outcome, st["status"], id)
		rec := st["record"].(map[string]any)
		require.Equal(t, outcome, rec["outcome"], id)
		require.Equal(t, id, rec["request_id"])
	}
}
