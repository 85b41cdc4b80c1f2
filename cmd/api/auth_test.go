package api_test

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"

	"github.com/personaq/personaq/cmd/api"
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

// lockedBuffer is a bytes.Buffer the server's goroutines write to while
// the test reads it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestTokensNeverLogged: at the most verbose level, the API's log names
// the token (or says it was unknown) and never holds a secret — not a
// known one, not a refused one, not part of one.
func TestTokensNeverLogged(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	var logs lockedBuffer
	log := zerolog.New(&logs).Level(zerolog.TraceLevel)
	s, err := api.New(api.Config{JetStream: e.js, Tokens: tokens(), Logger: &log})
	require.NoError(t, err)
	require.NoError(t, s.Start(context.Background()))
	hs := httptest.NewServer(s.Handler())
	t.Cleanup(func() { hs.Close(); s.Stop() })

	const refused = "a-refused-secret-token-0123456789"
	for _, c := range []struct {
		token string
		want  int
	}{
		{refused, http.StatusUnauthorized},
		{allToken[:len(allToken)-1], http.StatusUnauthorized},
		{readToken, http.StatusForbidden},
		{allToken, http.StatusCreated},
	} {
		r := doURL(t, hs.URL, "POST", "/v1/requests", c.token, map[string]any{"persona": "echo", "task_id": "t-log"})
		require.Equal(t, c.want, r.code, "%s", r.body)
	}
	require.Equal(t, http.StatusOK, doURL(t, hs.URL, "GET", "/v1/requests?task_id=t-log", allToken, nil).code)
	out := logs.String()
	require.Contains(t, out, "api: refused an unknown bearer token", "the refusal is logged")
	require.Contains(t, out, `"token":"reader"`, "a token is named")
	for _, secret := range []string{refused, allToken, readToken, allToken[:16], readToken[:16], refused[:16]} {
		require.NotContains(t, out, secret)
	}
}
