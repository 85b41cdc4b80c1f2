package api_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/personaq/personaq/consumers"
	"github.com/personaq/personaq/handlers"
	"github.com/personaq/personaq/retry"
)

func TestListFiltersAndPaging(t *testing.T) {
	t.Parallel()
	stuck := scaled(retry.PersonaPolicy(time.Minute))
	stuck.AttemptTimeout = time.Minute
	e := newEnv(t, consumers.Persona{Name: "stuck", Policy: stuck, Handler: handlers.Func(
		func(ctx context.Context, _ *handlers.Request) (handlers.Result, error) {
			<-ctx.Done()
			return handlers.Result{}, ctx.Err()
		})})
	var wantA []string
	for i := range 7 {
		st := e.submit(map[string]any{"persona": "echo", "task_id": "task-a", "request_id": fmt.Sprintf("a-%d", i)})
		wantA = append([]string{st["request_id"].(string)}, wantA...) // newest first
		time.Sleep(2 * time.Millisecond)                              // distinct created_at
	}
	e.submit(map[string]any{"persona": "terminal", "task_id": "task-b", "request_id": "b-1"})
	e.submit(map[string]any{"persona": "stuck", "task_id": "task-b", "request_id": "b-2"})
	e.awaitTerminal("b-1")
	for _, id := range wantA {
		e.awaitTerminal(id)
	}

	list := func(q string) map[string]any {
		t.Helper()
		var got map[string]any
		require.Eventually(t, func() bool { // the index follows the streams
			r := e.do("GET", "/v1/requests?"+q, readToken, nil)
			require.Equal(t, http.StatusOK, r.code, "%s", r.body)
			got = r.json(t)
			return true
		}, 5*time.Second, 50*time.Millisecond)
		return got
	}
	ids := func(m map[string]any) []string {
		var out []string
		for _, r := range m["requests"].([]any) {
			out = append(out, r.(map[string]any)["request_id"].(string))
		}
		return out
	}
	require.Eventually(t, func() bool {
		return len(ids(list("task_id=task-a&status=succeeded"))) == 7 && len(ids(list("task_id=task-b&status=quarantined"))) == 1
	}, 10*time.Second, 50*time.Millisecond, "the index saw every request end: %s", e.do("GET", "/v1/requests", readToken, nil).body)

	var paged []string
	cursor := ""
	for pages := 0; ; pages++ {
		require.Less(t, pages, 5)
		q := "task_id=task-a&limit=3"
		if cursor != "" {
			q += "&cursor=" + url.QueryEscape(cursor)
		}
		m := list(q)
		page := ids(m)
		require.LessOrEqual(t, len(page), 3)
		paged = append(paged, page...)
		next, _ := m["next_cursor"].(string)
		if next == "" {
			break
		}
		cursor = next
	}
	require.Equal(t, wantA, paged, "newest first, every request once")

	require.Equal(t, []string{"b-1"}, ids(list("task_id=task-b&status=quarantined")))
	require.Equal(t, []string{"b-2", "b-1"}, ids(list("task_id=task-b&status=queued,running,retrying&status=quarantined")))
	require.Equal(t, []string{"b-2"}, ids(list("persona=stuck")))
	require.Equal(t, []string{"b-2"}, ids(list("status=running")))
	require.Len(t, ids(list("persona=stuck,terminal")), 2)
	require.Empty(t, ids(list("task_id=task-b&persona=echo")))
	one := list("task_id=task-b&persona=terminal")["requests"].([]any)[0].(map[string]any)
	require.Equal(t, "quarantined", one["status"])
	require.Nil(t, one["record"], "lists carry no records")

	for q, field := range map[string]string{"status=done": "status", "limit=0": "limit", "limit=x": "limit", "cursor=not-a-cursor!": "cursor"} {
		r := e.do("GET", "/v1/requests?"+q, readToken, nil)
		require.Equal(t, http.StatusBadRequest, r.code, q)
		require.Equal(t, field, r.json(t)["field"], q)
		require.True(t, strings.HasSuffix(r.json(t)["type"].(string), "invalid-query"))
	}
}

// TestLargeOutputStreams: an output over the 64 KiB inline bound is kept in
// the object store and /output streams it byte for byte.
func TestLargeOutputStreams(t *testing.T) {
	t.Parallel()
	e := newEnv(t, bigOutputPersona())
	e.submit(map[string]any{"persona": "big", "task_id": "t-big", "request_id": "big-1"})
	st := e.awaitTerminal("big-1")
	rec := st["record"].(map[string]any)
	require.Nil(t, rec["output"], "not inline")
	ref := rec["output_ref"].(map[string]any)
	require.EqualValues(t, bigOutputSize, ref["size"])
	r := e.do("GET", "/v1/requests/big-1/output", readToken, nil)
	require.Equal(t, http.StatusOK, r.code)
	require.Equal(t, fmt.Sprint(bigOutputSize), r.header.Get("Content-Length"))
	require.Equal(t, `"`+strings.Repeat("b", bigOutputSize-2)+`"`, string(r.body))
}

// A process lists what it just saw: its own submits at once, and a request
// whose record its subscription delivered (a long-poll answered) with that
// status, without waiting for the streams the index follows.
func TestListReadsItsOwnWrites(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	for i := range 20 {
		id := fmt.Sprintf("ryw-%d", i)
		e.submit(map[string]any{"persona": "echo", "task_id": "task-ryw-" + id, "request_id": id})
		r := e.do("GET", "/v1/requests?task_id=task-ryw-"+id, readToken, nil)
		require.Equal(t, http.StatusOK, r.code, "%s", r.body)
		require.Contains(t, string(r.body), `"request_id":"`+id+`"`, "listed right after its submit")
		e.awaitTerminal(id)
		r = e.do("GET", "/v1/requests?status=succeeded&task_id=task-ryw-"+id, readToken, nil)
		require.Contains(t, string(r.body), `"request_id":"`+id+`"`, "listed as succeeded once its long-poll was answered")
	}
}
