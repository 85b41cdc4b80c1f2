package api_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestAuth(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	problemType := func(r response) string { return r.json(t)["type"].(string) }

	r := e.do("GET", "/v1/personas", "", nil)
	require.Equal(t, http.StatusUnauthorized, r.code)
	require.Equal(t, "urn:personaq:problem:unauthorized", problemType(r))
	require.Equal(t, "application/problem+json", r.header.Get("Content-Type"))
	require.NotEmpty(t, r.header.Get("WWW-Authenticate"))

	r = e.do("GET", "/v1/personas", "not-a-known-token-at-all", nil)
	require.Equal(t, http.StatusUnauthorized, r.code)
	r = e.do("GET", "/v1/personas", allToken[:len(allToken)-1], nil)
	require.Equal(t, http.StatusUnauthorized, r.code, "a prefix is not the token")

	r = e.do("POST", "/v1/requests", readToken, map[string]any{"persona": "echo", "task_id": "t"})
	require.Equal(t, http.StatusForbidden, r.code)
	require.Equal(t, "urn:personaq:problem:forbidden", problemType(r))
	require.Equal(t, "submit", r.json(t)["scope"])

	r = e.do("GET", "/v1/personas", readToken, nil)
	require.Equal(t, http.StatusOK, r.code, "%s", r.body)
	r = e.do("GET", "/healthz", "", nil)
	require.Equal(t, http.StatusOK, r.code)
	require.JSONEq(t, `{"status":"ok"}`, string(r.body))
}
