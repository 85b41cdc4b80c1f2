// Command demo-persona is a tiny HTTP persona for personaq's deployment
// examples (deployments/compose, deployments/kubernetes). It speaks the
// contract of personaq's HTTP invoker (handlers/http.go): each attempt is a
// POST of a JSON envelope {"request":{…},"attempt":N,…}; a 2xx answer
// succeeds, 408/429/5xx are retried (honouring Retry-After), other statuses
// are terminal.
//
//	POST /echo    works for -work (or the request input's "work_ms"), answers 200
//	POST /flaky   503 with Retry-After: 1 until attempt "succeed_on" (default 2), then 200
//	POST /reject  400: terminal, the request is quarantined
//	GET  /stats   calls so far per persona: by status, by attempt, by caller (replica),
//	              distinct requests, attempts called again (the same request and
//	              attempt number) and calls for a request already answered 2xx
//	GET  /healthz 200
//
// Callers are named by reverse DNS of their address (Docker's embedded DNS
// answers with the container name), so /stats shows how the work was spread
// over the replicas.
//
// -probe URL... waits until every URL answers (http(s)://: a 2xx status;
// tcp://host:port: a connection) and exits 0, or 1 after -probe-timeout:
// the image has no shell, so this is its health check and the compose
// file's "wait for the cluster" step.
//
// Standard library only; see build.sh for the FROM scratch image.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

func main() {
	addr := flag.String("addr", envOr("DEMO_PERSONA_ADDR", ":8080"), "listen address (env DEMO_PERSONA_ADDR)")
	work := flag.Duration("work", envDuration("DEMO_PERSONA_WORK", 50*time.Millisecond), "time /echo and /flaky work per attempt (env DEMO_PERSONA_WORK)")
	probe := flag.Bool("probe", false, "wait until every URL argument answers, then exit 0 (1 after -probe-timeout)")
	probeTimeout := flag.Duration("probe-timeout", 60*time.Second, "how long -probe waits")
	flag.Parse()
	if *probe {
		os.Exit(runProbe(flag.Args(), *probeTimeout))
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := serve(ctx, *addr, newPersona(*work)); err != nil {
		log.Fatal(err)
	}
}

func serve(ctx context.Context, addr string, p *persona) error {
	srv := &http.Server{Addr: addr, Handler: p.routes(), ReadHeaderTimeout: 10 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- srv.ListenAndServe() }()
	log.Printf("demo-persona listening on %s (work %s)", addr, p.work)
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return srv.Shutdown(sctx)
}

// envelope is the part of personaq's handlers.Envelope this persona reads.
type envelope struct {
	Request struct {
		RequestID string          `json:"request_id"`
		TaskID    string          `json:"task_id"`
		Persona   string          `json:"persona"`
		Input     json.RawMessage `json:"input"`
	} `json:"request"`
	Attempt int `json:"attempt"`
}

// knobs are optional request input fields that change the behaviour.
type knobs struct {
	WorkMs    *int `json:"work_ms"`
	SucceedOn int  `json:"succeed_on"`
}

type persona struct {
	work time.Duration

	mu    sync.Mutex
	stats map[string]*personaStats
	names map[string]string // caller address → name
	seen  map[string]*requestSeen
}

// requestSeen is what the persona remembers of one request id, so /stats
// shows work done twice: the same attempt number called again, or any call
// after the request was already answered with a success.
type requestSeen struct {
	attempts  map[int]bool
	succeeded bool
}

type personaStats struct {
	Calls     int            `json:"calls"`
	ByStatus  map[string]int `json:"by_status"`
	ByAttempt map[string]int `json:"by_attempt"`
	ByCaller  map[string]int `json:"by_caller"`
	// Requests counts distinct request ids called.
	Requests int `json:"requests"`
	// RepeatedAttempts counts calls whose request id and attempt number
	// were called before: one attempt run twice.
	RepeatedAttempts int `json:"repeated_attempts"`
	// AfterSuccess counts calls for a request this persona had already
	// answered with a 2xx: completed work run again.
	AfterSuccess int `json:"after_success"`
}

func newPersona(work time.Duration) *persona {
	return &persona{work: work, stats: map[string]*personaStats{}, names: map[string]string{}, seen: map[string]*requestSeen{}}
}

func (p *persona) routes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /echo", p.attempt(p.echo))
	mux.HandleFunc("POST /flaky", p.attempt(p.flaky))
	mux.HandleFunc("POST /reject", p.attempt(p.reject))
	mux.HandleFunc("GET /stats", p.getStats)
	mux.HandleFunc("DELETE /stats", p.resetStats)
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok\n") })
	return mux
}

// answer is what a persona behaviour decides.
type answer struct {
	status     int
	retryAfter string
	body       any
}

// attempt decodes the envelope, runs fn and records the call.
func (p *persona) attempt(fn func(context.Context, *envelope, knobs) answer) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var env envelope
		if err := json.NewDecoder(io.LimitReader(r.Body, 4<<20)).Decode(&env); err != nil {
			writeJSON(w, http.StatusBadRequest, map[string]string{"error": "not a personaq envelope: " + err.Error()})
			return
		}
		var k knobs
		if len(env.Request.Input) > 0 {
			_ = json.Unmarshal(env.Request.Input, &k) // any input is fine; knobs are optional
		}
		a := fn(r.Context(), &env, k)
		if a.retryAfter != "" {
			w.Header().Set("Retry-After", a.retryAfter)
		}
		writeJSON(w, a.status, a.body)
		p.record(strings.TrimPrefix(r.URL.Path, "/"), env.Request.RequestID, a.status, env.Attempt, p.caller(r.Context(), r.RemoteAddr))
	}
}

func (p *persona) echo(ctx context.Context, env *envelope, k knobs) answer {
	if !p.sleep(ctx, k) {
		return answer{status: http.StatusServiceUnavailable, body: map[string]string{"error": "cancelled"}}
	}
	return answer{status: http.StatusOK, body: map[string]any{
		"persona": "echo", "task_id": env.Request.TaskID, "attempt": env.Attempt, "input": env.Request.Input,
		"progress": map[string]int{"completed": 1, "total": 1},
	}}
}

func (p *persona) flaky(ctx context.Context, env *envelope, k knobs) answer {
	succeedOn := k.SucceedOn
	if succeedOn <= 0 {
		succeedOn = 2
	}
	if !p.sleep(ctx, k) {
		return answer{status: http.StatusServiceUnavailable, body: map[string]string{"error": "cancelled"}}
	}
	if env.Attempt < succeedOn {
		return answer{status: http.StatusServiceUnavailable, retryAfter: "1", body: map[string]string{
			"error": fmt.Sprintf("demo: flaky failure on attempt %d (succeeds on attempt %d)", env.Attempt, succeedOn),
		}}
	}
	return answer{status: http.StatusOK, body: map[string]any{"persona": "flaky", "task_id": env.Request.TaskID, "attempt": env.Attempt}}
}

func (p *persona) reject(context.Context, *envelope, knobs) answer {
	return answer{status: http.StatusBadRequest, body: map[string]any{
		"error": map[string]string{"type": "invalid_request_error", "message": "demo: the prompt is malformed"},
	}}
}

// sleep stands in for an agent's work; false when the caller gave up.
func (p *persona) sleep(ctx context.Context, k knobs) bool {
	d := p.work
	if k.WorkMs != nil {
		d = time.Duration(*k.WorkMs) * time.Millisecond
	}
	if d <= 0 {
		return true
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

func (p *persona) record(name, requestID string, status, attempt int, caller string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := p.stats[name]
	if s == nil {
		s = &personaStats{ByStatus: map[string]int{}, ByAttempt: map[string]int{}, ByCaller: map[string]int{}}
		p.stats[name] = s
	}
	s.Calls++
	s.ByStatus[strconv.Itoa(status)]++
	s.ByAttempt[strconv.Itoa(attempt)]++
	s.ByCaller[caller]++
	seen := p.seen[requestID]
	if seen == nil {
		seen = &requestSeen{attempts: map[int]bool{}}
		p.seen[requestID] = seen
		s.Requests++
	}
	if seen.attempts[attempt] {
		s.RepeatedAttempts++
	}
	if seen.succeeded {
		s.AfterSuccess++
	}
	seen.attempts[attempt] = true
	seen.succeeded = seen.succeeded || status/100 == 2
}

// caller names the client by reverse DNS (cached), else by its IP.
func (p *persona) caller(ctx context.Context, remote string) string {
	host, _, err := net.SplitHostPort(remote)
	if err != nil {
		host = remote
	}
	p.mu.Lock()
	name, ok := p.names[host]
	p.mu.Unlock()
	if ok {
		return name
	}
	name = host
	lctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	if names, err := net.DefaultResolver.LookupAddr(lctx, host); err == nil && len(names) > 0 {
		// Docker answers "project_service_1.network."; keep the container name.
		name = strings.SplitN(strings.TrimSuffix(names[0], "."), ".", 2)[0]
	}
	p.mu.Lock()
	p.names[host] = name
	p.mu.Unlock()
	return name
}

func (p *persona) getStats(w http.ResponseWriter, _ *http.Request) {
	p.mu.Lock()
	defer p.mu.Unlock()
	names := make([]string, 0, len(p.stats))
	for n := range p.stats {
		names = append(names, n)
	}
	sort.Strings(names)
	out := map[string]any{}
	total := 0
	for _, n := range names {
		out[n] = p.stats[n]
		total += p.stats[n].Calls
	}
	writeJSON(w, http.StatusOK, map[string]any{"calls": total, "personas": out})
}

func (p *persona) resetStats(w http.ResponseWriter, _ *http.Request) {
	p.mu.Lock()
	p.stats = map[string]*personaStats{}
	p.seen = map[string]*requestSeen{}
	p.mu.Unlock()
	w.WriteHeader(http.StatusNoContent)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// runProbe waits until every target answers; it returns the exit code.
func runProbe(targets []string, timeout time.Duration) int {
	if len(targets) == 0 {
		fmt.Fprintln(os.Stderr, "demo-persona -probe: name at least one http(s):// or tcp:// URL")
		return 2
	}
	deadline := time.Now().Add(timeout)
	for _, t := range targets {
		for {
			err := probeOnce(t)
			if err == nil {
				break
			}
			if time.Now().After(deadline) {
				fmt.Fprintf(os.Stderr, "demo-persona -probe: %s: %v (gave up after %s)\n", t, err, timeout)
				return 1
			}
			time.Sleep(500 * time.Millisecond)
		}
	}
	return 0
}

func probeOnce(target string) error {
	u, err := url.Parse(target)
	if err != nil {
		return err
	}
	switch u.Scheme {
	case "tcp":
		c, err := net.DialTimeout("tcp", u.Host, 2*time.Second)
		if err != nil {
			return err
		}
		return c.Close()
	case "http", "https":
		client := &http.Client{Timeout: 2 * time.Second}
		resp, err := client.Get(target)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
		if resp.StatusCode/100 != 2 {
			return fmt.Errorf("status %d", resp.StatusCode)
		}
		return nil
	}
	return errors.New("want an http://, https:// or tcp:// URL")
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

func envDuration(key string, def time.Duration) time.Duration {
	v := os.Getenv(key)
	if v == "" {
		return def
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		log.Fatalf("%s: %v", key, err)
	}
	return d
}
