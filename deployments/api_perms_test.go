package deployments_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"

	"github.com/personaq/personaq/cmd/api"
	"github.com/personaq/personaq/consumers"
	pqclient "github.com/personaq/personaq/consumers/client"
	"github.com/personaq/personaq/schemas"
)

// runPermReplica runs a replica as the personaq user until the test ends.
func runPermReplica(t *testing.T, replica *client) {
	t.Helper()
	log := zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.WarnLevel)
	rt, err := consumers.New(consumers.Config{
		WithoutLedger: true, JetStream: replica.js, Personas: testPersonas(), Logger: &log, Topology: outputsOutOfLine,
		DrainTimeout: 2 * time.Second, FetchMaxWait: 200 * time.Millisecond,
	})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = rt.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
}

// TestNATSPermissionsPublisherSubmitsWithTheGoClient: the publisher user
// may do all a submit does (queued event, the lookups that refuse a reused
// request id with other content).
func TestNATSPermissionsPublisherSubmitsWithTheGoClient(t *testing.T) {
	t.Parallel() // a server of its own on random ports
	srv := startAuthServer(t)
	admin, replicaUser, publisher := dial(t, srv, "admin"), dial(t, srv, "personaq"), dial(t, srv, "publisher")
	provisionAsAdmin(t, admin, testPersonas())
	runPermReplica(t, replicaUser)
	pc, err := pqclient.New(pqclient.Config{JetStream: publisher.js, Topology: outputsOutOfLine})
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	req := schemas.NewRequest("task-submit", "main", "echo")
	res, err := pc.Run(ctx, req)
	require.NoError(t, err)
	require.NotEmpty(t, res.Output)
	dup, err := pc.Submit(ctx, req)
	require.NoError(t, err)
	require.True(t, dup.Duplicate)
	other := *req
	other.Step = "review"
	_, err = pc.Submit(ctx, &other)
	require.ErrorIs(t, err, pqclient.ErrConflict)
	require.Empty(t, publisher.errs.violations())
}

// TestNATSPermissionsAPIServes: `personaq api` as the api user submits,
// long-polls, streams a large output and lists personas and requests
// without a permissions violation.
func TestNATSPermissionsAPIServes(t *testing.T) {
	t.Parallel() // a server of its own on random ports
	srv := startAuthServer(t)
	admin, replicaUser, apiUser := dial(t, srv, "admin"), dial(t, srv, "personaq"), dial(t, srv, "api")
	provisionAsAdmin(t, admin, testPersonas())
	runPermReplica(t, replicaUser)
	log := zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.WarnLevel)
	const token = "deployments-test-api-token"
	s, err := api.New(api.Config{JetStream: apiUser.js, Topology: outputsOutOfLine, Logger: &log,
		Tokens: []api.Token{{Name: "test", Secret: token, Scopes: api.AllScopes}}})
	require.NoError(t, err)
	require.NoError(t, s.Start(context.Background()))
	hs := httptest.NewServer(s.Handler())
	t.Cleanup(func() { hs.Close(); s.Stop() })
	call := func(method, path, body string) (int, string) {
		req, err := http.NewRequest(method, hs.URL+path, strings.NewReader(body))
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		data, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return resp.StatusCode, string(data)
	}
	code, body := call("POST", "/v1/requests", `{"persona":"echo","task_id":"task-api","request_id":"api-1","input":{"x":1}}`)
	require.Equal(t, http.StatusCreated, code, body)
	code, body = call("GET", "/v1/requests/api-1?wait=20s", "")
	require.Equal(t, http.StatusOK, code, body)
	var st struct {
		Status string `json:"status"`
	}
	require.NoError(t, json.Unmarshal([]byte(body), &st))
	require.Equal(t, "succeeded", st.Status)
	code, body = call("GET", "/v1/requests/api-1/output", "")
	require.Equal(t, http.StatusOK, code, body)
	code, body = call("GET", "/v1/requests/api-1/events", "")
	require.Equal(t, http.StatusOK, code, body)
	require.Contains(t, body, "event: terminal")
	code, body = call("GET", "/v1/personas", "")
	require.Equal(t, http.StatusOK, code, body)
	require.Contains(t, body, `"name":"echo"`)
	require.Eventually(t, func() bool {
		_, body := call("GET", "/v1/requests?task_id=task-api", "")
		return strings.Contains(body, `"api-1"`)
	}, 5*time.Second, 50*time.Millisecond)
	code, _ = call("POST", "/v1/requests", `{"persona":"echo","task_id":"task-api","request_id":"api-1"}`)
	require.Equal(t, http.StatusConflict, code)
	require.Empty(t, apiUser.errs.violations())
}
