package clients_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/personaq/personaq/integration/testenv"
)

// The clients' live output tests need personas that stream, and streaming
// the test can pace: a client must see a chunk before the next is written
// (several chunks, not one coalesced), a connection is cut between two
// chunks, a caller arrives mid-stream. `personaq dev`'s demo personas do not
// stream, so the harness serves HTTP personas of its own (streamPersonas,
// answering text/event-stream) from one `personaq serve` replica on dev's
// NATS, and the tests open the gates the personas wait at.

// streamScript is a streaming persona's request input: the steps of each
// attempt (the last list serves later attempts too). Without one the
// persona streams defaultScript.
type streamScript struct {
	Attempts [][]streamStep `json:"attempts"`
}

// streamStep is one thing a streaming attempt does.
type streamStep struct {
	// Text is written as one event: {"personaq_output": Text}.
	Text string `json:"text,omitempty"`
	// Gate waits until the test opens the gate of that name
	// (POST /gates/<name>).
	Gate string `json:"gate,omitempty"`
	// Fill writes this many bytes of "x", 4 KiB per event (the cap).
	Fill int `json:"fill,omitempty"`
	// Drop hangs up mid-answer: the attempt fails as a network error and
	// is retried.
	Drop bool `json:"drop,omitempty"`
	// Stamps writes this many lines, each the time it is written (Unix
	// nanoseconds), one every EveryMs: the live output latency benchmark
	// (clients/python/bench_live.py) measures write→caller with them.
	Stamps  int `json:"stamps,omitempty"`
	EveryMs int `json:"every_ms,omitempty"`
}

// defaultScript is what a streaming persona writes for a request without a
// script: the reviewer of docs/output.md, as the READMEs' examples show it.
var defaultScript = []streamStep{{Text: "Reading the code.\n"}, {Text: "The change is sound.\n"}}

// gateWait bounds how long a persona waits at a gate: a test that failed
// before opening it must not hold the replica until its drain timeout.
const gateWait = 2 * time.Minute

// streamPersonas is the HTTP server behind the streaming personas.
type streamPersonas struct {
	srv   *httptest.Server
	mu    sync.Mutex
	gates map[string]chan struct{}
}

func startStreamPersonas(t *testing.T) *streamPersonas {
	t.Helper()
	s := &streamPersonas{gates: map[string]chan struct{}{}}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /persona", s.persona)
	mux.HandleFunc("POST /gates/{name}", func(w http.ResponseWriter, r *http.Request) {
		g := s.gate(r.PathValue("name"))
		s.mu.Lock()
		select {
		case <-g:
		default:
			close(g)
		}
		s.mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	})
	s.srv = httptest.NewServer(mux)
	t.Cleanup(s.srv.Close)
	return s
}

func (s *streamPersonas) gate(name string) chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	g, ok := s.gates[name]
	if !ok {
		g = make(chan struct{})
		s.gates[name] = g
	}
	return g
}

// persona answers one attempt: the script's steps as server-sent events.
func (s *streamPersonas) persona(w http.ResponseWriter, r *http.Request) {
	var env struct {
		Attempt int `json:"attempt"`
		Request struct {
			Input json.RawMessage `json:"input"`
		} `json:"request"`
	}
	if err := json.NewDecoder(r.Body).Decode(&env); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var script streamScript
	if len(env.Request.Input) > 0 {
		if err := json.Unmarshal(env.Request.Input, &script); err != nil {
			http.Error(w, "input: "+err.Error(), http.StatusBadRequest)
			return
		}
	}
	steps := defaultScript
	if n := len(script.Attempts); n > 0 {
		steps = script.Attempts[min(max(env.Attempt, 1), n)-1]
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	f, _ := w.(http.Flusher)
	for _, st := range steps {
		switch {
		case st.Drop:
			panic(http.ErrAbortHandler) // the replica reads an unexpected EOF
		case st.Gate != "":
			select {
			case <-s.gate(st.Gate):
			case <-r.Context().Done():
				return
			case <-time.After(gateWait):
				return
			}
		case st.Stamps > 0:
			for i := 0; i < st.Stamps; i++ {
				if i > 0 {
					time.Sleep(time.Duration(st.EveryMs) * time.Millisecond) // the benchmark's write pace
				}
				writeOutputEvent(w, strconv.FormatInt(time.Now().UnixNano(), 10)+"\n")
				if f != nil {
					f.Flush()
				}
			}
		case st.Fill > 0:
			for left := st.Fill; left > 0; left -= 4096 {
				writeOutputEvent(w, strings.Repeat("x", min(left, 4096)))
			}
		default:
			writeOutputEvent(w, st.Text)
		}
		if f != nil {
			f.Flush()
		}
	}
}

func writeOutputEvent(w http.ResponseWriter, text string) {
	data, _ := json.Marshal(map[string]string{"personaq_output": text})
	fmt.Fprintf(w, "data: %s\n\n", data)
}

// streamServeConfig serves the streaming personas: streamer (scripted by
// its input; quick retries, no circuit breaker, answers up to 8 MiB for the
// cap) and reviewer (the default script).
const streamServeConfig = `personas:
  streamer:
    invoker: {type: http, url: "%[1]s/persona", max_response_bytes: 8388608}
    timeout: 2m
    circuit: {disabled: true}
    policy:
      preset: persona
      max_attempts: 3
      schedule: {type: fixed, every: 100ms}
      network_delay: 100ms
  reviewer:
    invoker: {type: http, url: "%[1]s/persona"}
    timeout: 30s
`

// startStreamReplica starts the streaming personas' server and a
// `personaq serve` replica serving them on dev's NATS, and waits until the
// API lists both personas. It returns the base URL of the gates.
func startStreamReplica(ctx context.Context, t *testing.T, bin, natsURL, apiURL, token string) string {
	t.Helper()
	sp := startStreamPersonas(t)
	cfg := filepath.Join(t.TempDir(), "streaming.yaml")
	require.NoError(t, os.WriteFile(cfg, []byte(fmt.Sprintf(streamServeConfig, sp.srv.URL)), 0o600))
	ctx, cancel := context.WithCancel(ctx)
	cmd := exec.CommandContext(ctx, bin, "--nats-url", natsURL, "serve", "--config", cfg)
	rs := testenv.StartRedis(t) // a replica's attempt ledger
	cmd.Env = append(os.Environ(), "PERSONAQ_REDIS_URL=redis://"+rs.Addr+"/0")
	cmd.Cancel = func() error { return cmd.Process.Signal(os.Interrupt) }
	cmd.WaitDelay = 10 * time.Second
	logs := &tsLog{found: make(chan []string, 1)}
	cmd.Stdout, cmd.Stderr = logs, logs
	require.NoError(t, cmd.Start())
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		cancel()
		<-exited
		if t.Failed() {
			t.Logf("personaq serve (streaming personas) output:\n%s", logs.String())
		}
	})
	waitServed(t, apiURL, token, exited, logs, "streamer", "reviewer")
	return sp.srv.URL
}

// waitServed polls GET /v1/personas until every name is served.
func waitServed(t *testing.T, apiURL, token string, exited <-chan struct{}, logs *tsLog, names ...string) {
	t.Helper()
	url := strings.TrimSuffix(strings.TrimSuffix(apiURL, "/"), "/v1") + "/v1/personas"
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-exited:
			t.Fatalf("personaq serve exited before serving the streaming personas:\n%s", logs.String())
		default:
		}
		if served(url, token, names) {
			return
		}
		time.Sleep(100 * time.Millisecond) // polling a process we do not control
	}
	t.Fatalf("the API did not list %v within 60s:\n%s", names, logs.String())
}

func served(url, token string, names []string) bool {
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		return false
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	var body struct {
		Personas []struct {
			Name string `json:"name"`
		} `json:"personas"`
	}
	if resp.StatusCode != http.StatusOK || json.NewDecoder(resp.Body).Decode(&body) != nil {
		return false
	}
	have := map[string]bool{}
	for _, p := range body.Personas {
		have[p.Name] = true
	}
	for _, n := range names {
		if !have[n] {
			return false
		}
	}
	return true
}
