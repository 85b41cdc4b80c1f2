package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/personaq/personaq/handlers"
	"github.com/personaq/personaq/retry"
	"github.com/personaq/personaq/schemas"
)

// Every test returns with nothing it started still running: the persona's
// HTTP server and the invoker's idle connections close with the test.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestContract drives the demo persona with personaq's own HTTP invoker, so
// the two agree on the wire format and on how each answer is classified.
func TestContract(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(newPersona(0).routes())
	t.Cleanup(srv.Close)

	call := func(t *testing.T, path string, attempt int) (handlers.Result, error) {
		t.Helper()
		inv, err := handlers.NewHTTP(handlers.HTTPConfig{URL: srv.URL + path})
		require.NoError(t, err)
		t.Cleanup(inv.CloseIdleConnections)
		req := &handlers.Request{Message: schemas.NewRequest("task-1", "main", path[1:]), Attempt: attempt}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		return inv.Handle(ctx, req)
	}
	t.Run("Attempts", func(t *testing.T) { // parallel cases end before /stats is read
		for _, tc := range []struct {
			name, path string
			attempt    int
			class      retry.Class
			after      time.Duration
		}{
			{"EchoSucceeds", "/echo", 1, retry.ClassSucceeded, 0},
			{"FlakyFailsFirst", "/flaky", 1, retry.ClassRetryable, time.Second},
			{"FlakySucceedsSecond", "/flaky", 2, retry.ClassSucceeded, 0},
			{"RejectIsTerminal", "/reject", 1, retry.ClassTerminal, 0},
		} {
			t.Run(tc.name, func(t *testing.T) {
				t.Parallel()
				res, err := call(t, tc.path, tc.attempt)
				c := handlers.Classify(err)
				require.Equal(t, tc.class, c.Class, "error: %v", err)
				require.Equal(t, tc.after, c.RetryAfter)
				if tc.class == retry.ClassSucceeded {
					require.NotEmpty(t, res.Output)
				}
			})
		}
	})

	resp, err := http.Get(srv.URL + "/stats")
	require.NoError(t, err)
	defer resp.Body.Close()
	var stats struct {
		Calls    int                      `json:"calls"`
		Personas map[string]*personaStats `json:"personas"`
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&stats))
	require.Equal(t, 2, stats.Personas["flaky"].Calls)
	require.Equal(t, map[string]int{"503": 1, "200": 1}, stats.Personas["flaky"].ByStatus)
}

func TestProbe(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(newPersona(0).routes())
	t.Cleanup(srv.Close)
	require.Equal(t, 0, runProbe([]string{srv.URL + "/healthz", "tcp://" + srv.Listener.Addr().String()}, time.Second))
	require.Equal(t, 1, runProbe([]string{srv.URL + "/nope"}, 600*time.Millisecond))
	require.Equal(t, 2, runProbe(nil, time.Second))
}

// TestStatsCountWorkDoneTwice: /stats tells an attempt called again, and a
// call for a request already answered 2xx, from the first run of each.
func TestStatsCountWorkDoneTwice(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(newPersona(0).routes())
	t.Cleanup(srv.Close)
	post := func(id string, attempt int) {
		body := fmt.Sprintf(`{"request":{"request_id":%q,"task_id":"t","persona":"echo","input":{}},"attempt":%d}`, id, attempt)
		resp, err := http.Post(srv.URL+"/echo", "application/json", strings.NewReader(body))
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, resp.StatusCode)
		require.NoError(t, resp.Body.Close())
	}
	post("a", 1)
	post("b", 1)
	post("a", 1) // the same attempt again, after its success
	post("a", 2) // a new attempt of a request already answered

	resp, err := http.Get(srv.URL + "/stats")
	require.NoError(t, err)
	defer resp.Body.Close()
	var stats struct {
		Personas map[string]*personaStats `json:"personas"`
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&stats))
	echo := stats.Personas["echo"]
	require.Equal(t, 4, echo.Calls)
	require.Equal(t, 2, echo.Requests)
	require.Equal(t, 1, echo.RepeatedAttempts)
	require.Equal(t, 2, echo.AfterSuccess)
}
