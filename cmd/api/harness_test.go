package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"

	"github.com/personaq/personaq/cmd/api"
	"github.com/personaq/personaq/consumers"
	"github.com/personaq/personaq/handlers"
	"github.com/personaq/personaq/integration/testenv"
	"github.com/personaq/personaq/retry"
)

const (
	allToken  = "test-token-with-every-scope"
	readToken = "test-token-read-only-scope"
)

// env is a live deployment: an in-process NATS server, a runtime serving
// the demo personas (delays scaled down) and an API server over HTTP.
type env struct {
	t    testing.TB
	nats *testenv.NATS
	js   jetstream.JetStream
	api  *api.Server
	http *httptest.Server
	log  zerolog.Logger
}

func tokens() []api.Token {
	return []api.Token{
		{Name: "all", Secret: allToken, Scopes: []api.Scope{api.ScopeAdmin}},
		{Name: "reader", Secret: readToken, Scopes: []api.Scope{api.ScopeRead}},
	}
}

func newEnv(t testing.TB, extra ...consumers.Persona) *env {
	t.Helper()
	n := testenv.StartNATS(t)
	e := &env{t: t, nats: n, js: n.JetStream(t), log: zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.WarnLevel)}
	e.serve(append(demoPersonas(), extra...)...)
	e.api, e.http = e.startAPI(e.js)
	return e
}

// startAPI serves an API server on js until the test ends.
func (e *env) startAPI(js jetstream.JetStream) (*api.Server, *httptest.Server) {
	e.t.Helper()
	s, err := api.New(api.Config{JetStream: js, Tokens: tokens(), Logger: &e.log, KeepAlive: 200 * time.Millisecond})
	require.NoError(e.t, err)
	require.NoError(e.t, s.Start(context.Background()))
	hs := httptest.NewServer(s.Handler())
	e.t.Cleanup(func() { hs.CloseClientConnections(); hs.Close(); s.Stop() })
	return s, hs
}

// demoPersonas are handlers.DemoPersonas under the persona preset scaled
// down a hundredfold (plateau under the adaptive one), as `personaq dev`
// serves them.
func demoPersonas() []consumers.Persona {
	var out []consumers.Persona
	for name, h := range handlers.DemoPersonas() {
		p := scaled(retry.PersonaPolicy(60 * time.Second))
		if name == "plateau" {
			p = scaled(retry.AdaptivePolicy())
		}
		out = append(out, consumers.Persona{Name: name, Handler: h, Policy: p, Concurrency: 8})
	}
	return out
}

// stillRunning is the policy_overrides of a slowpoke request a test needs
// running for its whole length: one attempt of 2 minutes, where the scaled
// policy's would all have ended in about 2.5 s.
var stillRunning = map[string]any{"attempt_timeout_ms": 120_000, "max_attempts": 1}

func scaled(p retry.Policy) retry.Policy {
	p = p.WithDefaults()
	p.AttemptTimeout = 600 * time.Millisecond
	p.Schedule = retry.Linear{Step: 30 * time.Millisecond}
	p.NetworkDelay = 10 * time.Millisecond
	return p
}

func (e *env) serve(personas ...consumers.Persona) {
	e.t.Helper()
	rt, err := consumers.New(consumers.Config{JetStream: e.js, Personas: personas, Logger: &e.log, WithoutLedger: true,
		DrainTimeout: 2 * time.Second, FetchMaxWait: 100 * time.Millisecond})
	require.NoError(e.t, err)
	require.NoError(e.t, rt.Provision(context.Background()))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = rt.Run(ctx) }()
	var once sync.Once
	e.t.Cleanup(func() { once.Do(func() { cancel(); <-done }) })
}

// response is one HTTP answer, read whole.
type response struct {
	code   int
	header http.Header
	body   []byte
}

func (r response) json(t testing.TB) map[string]any {
	t.Helper()
	var m map[string]any
	require.NoError(t, json.Unmarshal(r.body, &m), "body: %s", r.body)
	return m
}

// do sends one request with token ("" : none).
func (e *env) do(method, path, token string, body any, hdr ...string) response {
	e.t.Helper()
	return doURL(e.t, e.http.URL, method, path, token, body, hdr...)
}

func doURL(t testing.TB, base, method, path, token string, body any, hdr ...string) response {
	t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	case []byte:
		rd = bytes.NewReader(b)
	default:
		data, err := json.Marshal(b)
		require.NoError(t, err)
		rd = bytes.NewReader(data)
	}
	req, err := http.NewRequest(method, base+path, rd)
	require.NoError(t, err)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return response{code: resp.StatusCode, header: resp.Header, body: data}
}

// submit posts body and requires 201.
func (e *env) submit(body map[string]any) map[string]any {
	e.t.Helper()
	r := e.do("POST", "/v1/requests", allToken, body)
	require.Equal(e.t, http.StatusCreated, r.code, "%s", r.body)
	return r.json(e.t)
}

// awaitTerminal long-polls until the request is terminal.
func (e *env) awaitTerminal(id string) map[string]any {
	e.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		r := e.do("GET", "/v1/requests/"+id+"?wait=10s", allToken, nil)
		require.Equal(e.t, http.StatusOK, r.code, "%s", r.body)
		if st := r.json(e.t); st["record"] != nil {
			return st
		}
	}
	e.t.Fatalf("request %s not terminal in 30s", id)
	return nil
}

// bigOutputSize is over the 64 KiB inline bound: the output goes to the
// object store.
const bigOutputSize = 200 << 10

// bigOutputPersona answers a JSON string of bigOutputSize bytes.
func bigOutputPersona() consumers.Persona {
	return consumers.Persona{Name: "big", Policy: scaled(retry.PersonaPolicy(time.Minute)), Handler: handlers.Func(
		func(context.Context, *handlers.Request) (handlers.Result, error) {
			out, _ := json.Marshal(strings.Repeat("b", bigOutputSize-2))
			return handlers.Result{Output: out}, nil
		})}
}

func readAll(resp *http.Response) ([]byte, error) {
	defer resp.Body.Close()
	return io.ReadAll(resp.Body)
}
