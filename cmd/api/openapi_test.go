package api_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/pb33f/libopenapi"
	validator "github.com/pb33f/libopenapi-validator"
	oaserrors "github.com/pb33f/libopenapi-validator/errors"
	"github.com/stretchr/testify/require"

	"github.com/personaq/personaq/schemas/openapi"
)

// call is one request of the conformance run: which operation of the
// document it exercises, and what it sends.
type call struct {
	op, method, path, token string
	body                    string
	hdr                     []string
	want                    int
}

// TestServerConformsToOpenAPI: every route of the document is served, and
// every answer of a live server (real NATS, the real runtime, the demo
// personas) is valid against the document: status, headers and body.
func TestServerConformsToOpenAPI(t *testing.T) {
	t.Parallel()
	e := newEnv(t, bigOutputPersona())
	ok := e.submit(map[string]any{"persona": "echo", "task_id": "oas", "request_id": "oas-ok", "input": map[string]any{"a": 1}})
	e.submit(map[string]any{"persona": "terminal", "task_id": "oas", "request_id": "oas-blocked"})
	e.submit(map[string]any{"persona": "big", "task_id": "oas", "request_id": "oas-big"})
	// Still running when it is cancelled, however long the calls before take:
	// under the scaled policy (600 ms attempts) it had ended on a loaded
	// machine and its cancel answered 409.
	e.submit(map[string]any{"persona": "slowpoke", "task_id": "oas", "request_id": "oas-slow", "policy_overrides": stillRunning})
	for _, id := range []string{"oas-ok", "oas-blocked", "oas-big"} {
		e.awaitTerminal(id)
	}
	okBody := fmt.Sprintf(`{"persona":"echo","task_id":"oas","request_id":"oas-ok","input":{"a":1},"deadline":%q}`, ok["deadline"])
	calls := []call{
		{op: "submitRequest", method: "POST", path: "/v1/requests", token: allToken, body: `{"persona":"echo","task_id":"oas"}`, want: 201},
		{op: "submitRequest", method: "POST", path: "/v1/requests", token: allToken, body: okBody, want: 200},
		{op: "submitRequest", method: "POST", path: "/v1/requests", token: allToken, body: `{"persona":"echo","task_id":"oas","request_id":"oas-ok"}`, want: 409},
		{op: "submitRequest", method: "POST", path: "/v1/requests", token: allToken, body: `{"persona":"ekko","task_id":"oas"}`, want: 422},
		{op: "submitRequest", method: "POST", path: "/v1/requests", token: allToken, body: `{"persona":`, want: 400},
		{op: "submitRequest", method: "POST", path: "/v1/requests", token: allToken, body: `{"persona":"echo","task_id":"oas","x":1}`, want: 400},
		{op: "submitRequest", method: "POST", path: "/v1/requests", token: allToken, body: `{"persona":"echo","task_id":"` + strings.Repeat("x", 1<<20) + `"}`, want: 413},
		{op: "submitRequest", method: "POST", path: "/v1/requests", token: readToken, body: `{"persona":"echo","task_id":"oas"}`, want: 403},
		{op: "submitRequest", method: "POST", path: "/v1/requests", body: `{"persona":"echo","task_id":"oas"}`, want: 401},
		{op: "listRequests", method: "GET", path: "/v1/requests?task_id=oas&limit=2", token: readToken, want: 200},
		{op: "listRequests", method: "GET", path: "/v1/requests?status=succeeded,quarantined&persona=echo", token: readToken, want: 200},
		{op: "listRequests", method: "GET", path: "/v1/requests?status=bogus", token: readToken, want: 400},
		{op: "getRequest", method: "GET", path: "/v1/requests/oas-ok", token: readToken, want: 200},
		{op: "getRequest", method: "GET", path: "/v1/requests/oas-blocked?wait=1s", token: readToken, want: 200},
		{op: "getRequest", method: "GET", path: "/v1/requests/oas-slow", token: readToken, want: 200},
		{op: "getRequest", method: "GET", path: "/v1/requests/nope", token: readToken, want: 404},
		{op: "getRequest", method: "GET", path: "/v1/requests/oas-ok?wait=later", token: readToken, want: 400},
		{op: "getOutput", method: "GET", path: "/v1/requests/oas-ok/output", token: readToken, want: 200},
		{op: "getOutput", method: "GET", path: "/v1/requests/oas-big/output", token: readToken, want: 200},
		{op: "getOutput", method: "GET", path: "/v1/requests/oas-blocked/output", token: readToken, want: 404},
		{op: "getOutput", method: "GET", path: "/v1/requests/nope/output", token: readToken, want: 404},
		{op: "getEvents", method: "GET", path: "/v1/requests/oas-ok/events", token: readToken, want: 200},
		{op: "getEvents", method: "GET", path: "/v1/requests/oas-ok/events", token: readToken, hdr: []string{"Last-Event-ID", "terminal"}, want: 200},
		{op: "getEvents", method: "GET", path: "/v1/requests/nope/events", token: readToken, want: 404},
		{op: "cancelRequest", method: "POST", path: "/v1/requests/oas-slow/cancel", token: allToken, body: `{"reason":"conformance"}`, want: 200},
		{op: "cancelRequest", method: "POST", path: "/v1/requests/oas-ok/cancel", token: allToken, want: 409},
		{op: "cancelRequest", method: "POST", path: "/v1/requests/nope/cancel", token: allToken, body: `{}`, want: 404},
		{op: "cancelRequest", method: "POST", path: "/v1/requests/oas-ok/cancel", token: allToken, body: `{"why":"x"}`, want: 400},
		{op: "cancelRequest", method: "POST", path: "/v1/requests/oas-ok/cancel", token: readToken, want: 403},
		{op: "cancelTask", method: "POST", path: "/v1/tasks/oas/cancel", token: allToken, body: `{"reason":"conformance"}`, want: 200},
		{op: "cancelTask", method: "POST", path: "/v1/tasks/oas/cancel", want: 401},
		{op: "listPersonas", method: "GET", path: "/v1/personas", token: readToken, want: 200},
		{op: "getOpenAPI", method: "GET", path: "/v1/openapi.json", token: readToken, want: 200},
		{op: "health", method: "GET", path: "/healthz", want: 200},
	}
	doc, err := libopenapi.NewDocument(openapi.Document)
	require.NoError(t, err)
	v, errs := validator.NewValidator(doc)
	require.Empty(t, errs)
	covered := map[string]bool{}
	for _, c := range calls {
		t.Run(c.op+"_"+fmt.Sprint(c.want), func(t *testing.T) {
			req, resp := e.roundTrip(t, c)
			require.Equal(t, c.want, resp.StatusCode, "%s %s", c.method, c.path)
			valid, verrs := v.ValidateHttpResponse(req, resp)
			require.True(t, valid, "%s %s → %d: %s", c.method, c.path, resp.StatusCode, describe(verrs))
		})
		covered[c.op] = true
	}
	model, err := doc.BuildV3Model()
	require.NoError(t, err)
	for path, item := range model.Model.Paths.PathItems.FromOldest() {
		for method, op := range item.GetOperations().FromOldest() {
			require.True(t, covered[op.OperationId], "%s %s (%s) is exercised", method, path, op.OperationId)
		}
	}
	// The served document is the repository's.
	r := e.do("GET", "/v1/openapi.json", readToken, nil)
	require.Equal(t, openapi.Document, r.body)
}

func (e *env) roundTrip(t *testing.T, c call) (*http.Request, *http.Response) {
	t.Helper()
	var body io.Reader
	if c.body != "" {
		body = strings.NewReader(c.body)
	}
	req, err := http.NewRequest(c.method, e.http.URL+c.path, body)
	require.NoError(t, err)
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(c.hdr); i += 2 {
		req.Header.Set(c.hdr[i], c.hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	data, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	resp.Body.Close()
	resp.Body = io.NopCloser(bytes.NewReader(data))
	// The validator reads the path from the request; send it a fresh one.
	vreq, _ := http.NewRequest(c.method, "http://127.0.0.1:8080"+c.path, nil)
	vreq.Header = req.Header
	return vreq, resp
}

func describe(errs []*oaserrors.ValidationError) string {
	var b strings.Builder
	for _, e := range errs {
		raw, _ := json.Marshal(e)
		b.Write(raw)
		b.WriteByte('\n')
	}
	return b.String()
}
