package api_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestSubmitAnswers(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	body := map[string]any{"persona": "echo", "task_id": "story-42", "step": "plan", "request_id": "req-idem", "input": map[string]any{"goal": "x"}}

	r := e.do("POST", "/v1/requests", allToken, body)
	require.Equal(t, http.StatusCreated, r.code, "%s", r.body)
	require.Equal(t, "/v1/requests/req-idem", r.header.Get("Location"))
	first := r.json(t)
	require.Equal(t, "queued", first["status"])
	require.Equal(t, "echo", first["persona"])
	require.Equal(t, "story-42", first["task_id"])
	require.Equal(t, "plan", first["step"])
	deadline, err := time.Parse(time.RFC3339Nano, first["deadline"].(string))
	require.NoError(t, err)
	// The persona preset's budget: 4 × 600ms + the backoffs + 30s.
	require.WithinDuration(t, time.Now().Add(32*time.Second), deadline, 3*time.Second)

	t.Run("Idempotent", func(t *testing.T) {
		r := e.do("POST", "/v1/requests", allToken, body)
		require.Equal(t, http.StatusOK, r.code, "%s", r.body)
		require.Equal(t, first["deadline"], r.json(t)["deadline"], "the first deadline stands")
		require.Equal(t, "/v1/requests/req-idem", r.header.Get("Location"))
	})
	t.Run("Conflict", func(t *testing.T) {
		other := map[string]any{"persona": "echo", "task_id": "story-42", "step": "plan", "request_id": "req-idem", "input": map[string]any{"goal": "y"}}
		r := e.do("POST", "/v1/requests", allToken, other)
		require.Equal(t, http.StatusConflict, r.code, "%s", r.body)
		p := r.json(t)
		require.Equal(t, "urn:personaq:problem:conflict", p["type"])
		require.Equal(t, "request_id", p["field"])
		require.Equal(t, "req-idem", p["request"].(map[string]any)["request_id"])
	})
	t.Run("UnknownPersona", func(t *testing.T) {
		r := e.do("POST", "/v1/requests", allToken, map[string]any{"persona": "ekko", "task_id": "t"})
		require.Equal(t, http.StatusUnprocessableEntity, r.code, "%s", r.body)
		p := r.json(t)
		require.Equal(t, "urn:personaq:problem:unknown-persona", p["type"])
		require.Equal(t, "persona", p["field"])
		require.Equal(t, []any{"echo", "flaky", "plateau", "slowpoke", "terminal", "validator"}, p["served_personas"])
		require.Contains(t, p["detail"], "served: echo, flaky")
	})
	t.Run("MalformedJSON", func(t *testing.T) {
		r := e.do("POST", "/v1/requests", allToken, "{\n  \"persona\": \"echo\",\n  \"task_id\": ?\n}")
		require.Equal(t, http.StatusBadRequest, r.code)
		p := r.json(t)
		require.Equal(t, "urn:personaq:problem:invalid-json", p["type"])
		require.Contains(t, p["detail"], "line 3, column 14")
		for _, bad := range []string{"", "[1]", "null", `{"persona":"echo"} {}`, `{"persona":`} {
			r := e.do("POST", "/v1/requests", allToken, bad)
			require.Equal(t, http.StatusBadRequest, r.code, "%q", bad)
			require.Equal(t, "urn:personaq:problem:invalid-json", r.json(t)["type"], "%q", bad)
		}
	})
	t.Run("InvalidField", func(t *testing.T) {
		for field, b := range map[string]map[string]any{
			"colour":         {"persona": "echo", "task_id": "t", "colour": "red"},
			"agents.primary": {"persona": "echo", "task_id": "t", "agents": map[string]any{"primary": 5}},
			"task_id":        {"persona": "echo", "task_id": "has space"},
			"deadline":       {"persona": "echo", "task_id": "t", "deadline": "tomorrow"},
			"policy":         {"persona": "echo", "task_id": "t", "policy": "no-such-preset"},
		} {
			r := e.do("POST", "/v1/requests", allToken, b)
			require.Equal(t, http.StatusBadRequest, r.code, "%s: %s", field, r.body)
			p := r.json(t)
			require.Equal(t, "urn:personaq:problem:invalid-field", p["type"], field)
			require.Equal(t, field, p["field"])
		}
		r := e.do("POST", "/v1/requests", allToken, map[string]any{"task_id": "t"})
		require.Equal(t, http.StatusBadRequest, r.code)
		require.Equal(t, "persona", r.json(t)["field"])
	})
	t.Run("TooLarge", func(t *testing.T) {
		big := `{"persona":"echo","task_id":"t","input":"` + strings.Repeat("x", 1<<20) + `"}`
		r := e.do("POST", "/v1/requests", allToken, big)
		require.Equal(t, http.StatusRequestEntityTooLarge, r.code)
		p := r.json(t)
		require.Equal(t, "urn:personaq:problem:too-large", p["type"])
		require.EqualValues(t, 1<<20, p["limit_bytes"])
	})
	t.Run("NotFound", func(t *testing.T) {
		for _, path := range []string{"/v1/requests/never-submitted", "/v1/requests/never-submitted/output", "/v1/requests/never-submitted/events"} {
			r := e.do("GET", path, allToken, nil)
			require.Equal(t, http.StatusNotFound, r.code, path)
			require.Equal(t, "urn:personaq:problem:not-found", r.json(t)["type"], path)
		}
	})
	t.Run("DeadlineGiven", func(t *testing.T) {
		d := time.Now().Add(time.Hour).UTC().Truncate(time.Second).Format(time.RFC3339)
		st := e.submit(map[string]any{"persona": "echo", "task_id": "t-deadline", "deadline": d})
		require.Equal(t, d, st["deadline"])
		require.NotEmpty(t, st["request_id"], "a request id is made")
		require.Equal(t, "main", st["step"], "the default step")
	})
}

func TestLongPoll(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	t.Run("ReturnsAtTerminal", func(t *testing.T) {
		st := e.submit(map[string]any{"persona": "echo", "task_id": "t-lp", "input": map[string]any{"n": 1}})
		t0 := time.Now()
		r := e.do("GET", "/v1/requests/"+st["request_id"].(string)+"?wait=30s", allToken, nil)
		require.Equal(t, http.StatusOK, r.code)
		require.Less(t, time.Since(t0), 10*time.Second)
		got := r.json(t)
		require.Equal(t, "succeeded", got["status"])
		require.EqualValues(t, 1, got["attempts"])
		rec := got["record"].(map[string]any)
		require.Equal(t, map[string]any{"n": float64(1)}, rec["output"].(map[string]any)["input"])
		out := e.do("GET", "/v1/requests/"+st["request_id"].(string)+"/output", allToken, nil)
		require.Equal(t, http.StatusOK, out.code)
		require.Equal(t, "application/json", out.header.Get("Content-Type"))
	})
	t.Run("ReturnsAtWaitEnd", func(t *testing.T) {
		// Still running when the wait ends, however loaded the machine: under
		// the scaled policy (600 ms attempts) it could end first.
		st := e.submit(map[string]any{"persona": "slowpoke", "task_id": "t-lp", "policy_overrides": stillRunning})
		t0 := time.Now()
		r := e.do("GET", "/v1/requests/"+st["request_id"].(string)+"?wait=1", allToken, nil)
		require.Equal(t, http.StatusOK, r.code)
		require.GreaterOrEqual(t, time.Since(t0), time.Second)
		got := r.json(t)
		require.Contains(t, []any{"queued", "running", "retrying"}, got["status"])
		require.Nil(t, got["record"])
		out := e.do("GET", "/v1/requests/"+st["request_id"].(string)+"/output", allToken, nil)
		require.Equal(t, http.StatusNotFound, out.code)
		require.Equal(t, "urn:personaq:problem:no-output", out.json(t)["type"])
	})
	t.Run("BadWait", func(t *testing.T) {
		r := e.do("GET", "/v1/requests/x?wait=soon", allToken, nil)
		require.Equal(t, http.StatusBadRequest, r.code)
		require.Equal(t, "wait", r.json(t)["field"])
	})
}
