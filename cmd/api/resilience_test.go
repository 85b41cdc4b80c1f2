package api_test

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/personaq/personaq/cmd/api"
	"github.com/personaq/personaq/consumers"
	"github.com/personaq/personaq/handlers"
	"github.com/personaq/personaq/retry"
)

// TestUnavailableWhileNATSIsDown: every route that needs NATS answers 503
// with Retry-After, /healthz too; all is well again once it is back.
func TestUnavailableWhileNATSIsDown(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.nats.Stop()
	require.Eventually(t, func() bool { return e.do("GET", "/healthz", "", nil).code == http.StatusServiceUnavailable }, 10*time.Second, 20*time.Millisecond)
	for _, c := range []struct{ method, path string }{
		{"POST", "/v1/requests"}, {"GET", "/v1/requests/x"}, {"GET", "/v1/requests/x/output"},
		{"GET", "/v1/requests/x/events"}, {"GET", "/v1/personas"}, {"GET", "/v1/requests"},
	} {
		r := e.do(c.method, c.path, allToken, `{"persona":"echo","task_id":"t"}`)
		require.Equal(t, http.StatusServiceUnavailable, r.code, "%s %s", c.method, c.path)
		require.Equal(t, "2", r.header.Get("Retry-After"))
		require.Equal(t, "urn:personaq:problem:unavailable", r.json(t)["type"])
	}
	e.nats.Restart(t)
	require.Eventually(t, func() bool { return e.do("GET", "/healthz", "", nil).code == http.StatusOK }, 20*time.Second, 50*time.Millisecond)
	require.Eventually(t, func() bool {
		return e.do("POST", "/v1/requests", allToken, map[string]any{"persona": "echo", "task_id": "t-back"}).code == http.StatusCreated
	}, 20*time.Second, 100*time.Millisecond)
}

// TestRestartWhileLongPolling: the API process restarts while a caller
// long-polls; the caller reconnects (as the clients do) and gets the
// record.
func TestRestartWhileLongPolling(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	e := newEnv(t, consumers.Persona{Name: "gated", Policy: scaled(retry.PersonaPolicy(time.Minute)), Handler: handlers.Func(
		func(ctx context.Context, _ *handlers.Request) (handlers.Result, error) {
			select { // answers only once the API process has restarted
			case <-release:
				return handlers.Result{Output: json.RawMessage(`"done"`)}, nil
			case <-ctx.Done():
				return handlers.Result{}, ctx.Err()
			}
		})})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	first, stopFirst := serveOn(t, e, ln)
	base := "http://" + addr
	st := doURL(t, base, "POST", "/v1/requests", allToken, map[string]any{"persona": "gated", "task_id": "t-restart"})
	require.Equal(t, http.StatusCreated, st.code, "%s", st.body)
	id := st.json(t)["request_id"].(string)

	got := make(chan map[string]any, 1)
	go func() { // a caller's loop: long-poll, reconnect on a cut connection
		for {
			req, _ := http.NewRequest("GET", base+"/v1/requests/"+id+"?wait=30s", nil)
			req.Header.Set("Authorization", "Bearer "+allToken)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				time.Sleep(50 * time.Millisecond)
				continue
			}
			r := response{code: resp.StatusCode}
			r.body, err = readAll(resp)
			if err != nil || r.code != http.StatusOK {
				time.Sleep(50 * time.Millisecond)
				continue
			}
			if m := r.json(t); m["record"] != nil {
				got <- m
				return
			}
		}
	}()
	require.Eventually(t, func() bool { return first.Waiting() == 1 }, 5*time.Second, 10*time.Millisecond, "the caller waits")
	stopFirst() // the API process goes away mid-wait
	ln2, err := listenAgain(addr)
	require.NoError(t, err)
	second, _ := serveOn(t, e, ln2)
	require.Eventually(t, func() bool { return second.Waiting() == 1 }, 10*time.Second, 10*time.Millisecond, "the caller reconnected")
	close(release)
	select {
	case m := <-got:
		require.Equal(t, "succeeded", m["status"])
		require.Equal(t, "done", m["record"].(map[string]any)["output"])
	case <-time.After(30 * time.Second):
		t.Fatal("the caller never got the record")
	}
}

func serveOn(t *testing.T, e *env, ln net.Listener) (*api.Server, func()) {
	t.Helper()
	s, err := api.New(api.Config{JetStream: e.nats.JetStream(t), Tokens: tokens(), Logger: &e.log})
	require.NoError(t, err)
	require.NoError(t, s.Start(context.Background()))
	hs := &http.Server{Handler: s.Handler()}
	done := make(chan struct{})
	go func() { defer close(done); _ = hs.Serve(ln) }()
	stopped := false
	stop := func() {
		if !stopped {
			stopped = true
			_ = hs.Close()
			<-done
			s.Stop()
		}
	}
	t.Cleanup(stop)
	return s, stop
}

func listenAgain(addr string) (net.Listener, error) {
	var err error
	for range 100 {
		var ln net.Listener
		if ln, err = net.Listen("tcp", addr); err == nil {
			return ln, nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	return nil, errors.Join(errors.New("listen again on "+addr), err)
}
