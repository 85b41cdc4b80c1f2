//go:build integration

package integration

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/personaq/personaq/handlers"
	"github.com/personaq/personaq/integration/containers"
)

// agent is the persona endpoint the http invokers of the replicas call: an
// HTTP server the test runs on the host, bound to the network's gateway
// address (reachable from the replicas, and only from them). It records
// every call — which replica made it, for which request, when — so tests
// can tell where work ran and check that no request ever ran on two live
// replicas at once (no request runs on two live replicas at once).
//
//	POST /work      sleeps input.work_ms (default 1s), then answers 200
//	POST /crash     SIGKILLs the calling replica (a crash-looping message)
//	POST /fixable   400 (terminal) until fix() is called, then 200
type agent struct {
	URL string

	srv      *http.Server
	ln       net.Listener
	lookup   func(ip string) *containers.Replica
	fixed    atomic.Bool
	onCrash  func(*containers.Replica)
	shutdown context.CancelFunc
	ctx      context.Context

	mu      sync.Mutex
	calls   []*call
	kills   []kill
	aliases map[string]string    // replica IP → alias, once known
	tried   map[string]time.Time // replica IP → last failed lookup
}

// call is one HTTP attempt.
type call struct {
	Path, RequestID, From string // From: the replica's alias (or IP)
	IP                    string
	Attempt               int
	Start, End            time.Time
	Status                int
	Aborted               bool // the replica hung up (its attempt timed out, or it was stopped)
	Killed                bool // the replica was SIGKILLed while the call ran
}

func newAgent(gateway string, lookup func(ip string) *containers.Replica) (*agent, error) {
	ln, err := net.Listen("tcp", net.JoinHostPort(gateway, "0"))
	if err != nil {
		return nil, fmt.Errorf("agent: listen on the network gateway %s: %w", gateway, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	a := &agent{URL: "http://" + ln.Addr().String(), ln: ln, lookup: lookup, ctx: ctx,
		aliases: map[string]string{}, tried: map[string]time.Time{}, shutdown: cancel}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /work", a.work)
	mux.HandleFunc("POST /crash", a.crash)
	mux.HandleFunc("POST /fixable", a.fixable)
	a.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = a.srv.Serve(ln) }()
	return a, nil
}

func (a *agent) close() {
	a.shutdown()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_ = a.srv.Shutdown(ctx)
}

// begin decodes the envelope and records the call.
func (a *agent) begin(w http.ResponseWriter, r *http.Request) (*call, *handlers.Envelope, bool) {
	var env handlers.Envelope
	if err := json.NewDecoder(r.Body).Decode(&env); err != nil || env.Request == nil {
		http.Error(w, `{"error":"bad envelope"}`, http.StatusBadRequest)
		return nil, nil, false
	}
	ip, _, _ := net.SplitHostPort(r.RemoteAddr)
	c := &call{Path: r.URL.Path, RequestID: env.Request.RequestID, IP: ip, From: a.alias(ip), Attempt: env.Attempt, Start: time.Now()}
	a.mu.Lock()
	a.calls = append(a.calls, c)
	a.mu.Unlock()
	return c, &env, true
}

func (a *agent) end(c *call, status int, aborted bool) {
	a.mu.Lock()
	c.End, c.Status, c.Aborted = time.Now(), status, aborted
	a.mu.Unlock()
}

func (a *agent) work(w http.ResponseWriter, r *http.Request) {
	c, env, ok := a.begin(w, r)
	if !ok {
		return
	}
	var in struct {
		WorkMs int `json:"work_ms"`
	}
	_ = json.Unmarshal(env.Request.Input, &in)
	d := time.Second
	if in.WorkMs > 0 {
		d = time.Duration(in.WorkMs) * time.Millisecond
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-r.Context().Done():
		a.end(c, 0, true)
		return
	case <-a.ctx.Done():
		a.end(c, 0, true)
		return
	}
	a.end(c, http.StatusOK, false)
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprintf(w, `{"ok":true,"request_id":%q,"attempt":%d}`, c.RequestID, c.Attempt)
}

// crash kills the calling replica, like a persona that takes its worker
// down with it (out of memory, a segfault in a native library).
func (a *agent) crash(w http.ResponseWriter, r *http.Request) {
	c, _, ok := a.begin(w, r)
	if !ok {
		return
	}
	rep := a.lookup(c.IP)
	if rep == nil {
		a.end(c, http.StatusInternalServerError, false)
		http.Error(w, "unknown caller "+c.IP, http.StatusInternalServerError)
		return
	}
	a.markDead(c.IP)
	if err := rep.Kill(a.ctx); err != nil && !errors.Is(err, context.Canceled) {
		a.end(c, http.StatusInternalServerError, false)
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	a.end(c, 0, true)
	if a.onCrash != nil {
		a.onCrash(rep)
	}
}

func (a *agent) fixable(w http.ResponseWriter, r *http.Request) {
	c, _, ok := a.begin(w, r)
	if !ok {
		return
	}
	w.Header().Set("Content-Type", "application/json")
	if !a.fixed.Load() {
		a.end(c, http.StatusBadRequest, false)
		w.WriteHeader(http.StatusBadRequest)
		fmt.Fprint(w, `{"error":{"type":"invalid_request_error","message":"the agent cannot handle this yet"}}`)
		return
	}
	a.end(c, http.StatusOK, false)
	fmt.Fprintf(w, `{"ok":true,"request_id":%q}`, c.RequestID)
}

// fix makes /fixable succeed from now on (the operator deployed a fix).
func (a *agent) fix() { a.fixed.Store(true) }

// markDead notes that the replica at ip was killed now: calls it had open
// died with it, even if the agent's side of the connection lingers (a
// killed container sends no FIN or RST).
func (a *agent) markDead(ip string) {
	a.mu.Lock()
	a.kills = append(a.kills, kill{ip, time.Now()})
	a.mu.Unlock()
}

type kill struct {
	IP string
	At time.Time
}

// killedBetween reports whether the replica at ip was killed in [from, to].
func (a *agent) killedBetween(ip string, from, to time.Time) bool {
	for _, k := range a.kills {
		if k.IP == ip && !k.At.Before(from) && !k.At.After(to) {
			return true
		}
	}
	return false
}

// alias names the replica at ip, or returns ip while it is unknown (a
// replica takes work a moment before the test registers it). A failed
// lookup is retried after 200ms at the earliest.
func (a *agent) alias(ip string) string {
	a.mu.Lock()
	name, ok := a.aliases[ip]
	last := a.tried[ip]
	a.mu.Unlock()
	if ok {
		return name
	}
	if time.Since(last) < 200*time.Millisecond {
		return ip
	}
	rep := a.lookup(ip)
	a.mu.Lock()
	defer a.mu.Unlock()
	if rep == nil {
		a.tried[ip] = time.Now()
		return ip
	}
	a.aliases[ip] = rep.Alias()
	return rep.Alias()
}

// snapshot copies the calls so far, naming their replicas; a call whose
// replica was killed while it ran is marked Killed.
func (a *agent) snapshot() []call {
	a.mu.Lock()
	var unknown []string
	for _, c := range a.calls {
		if c.From == c.IP {
			unknown = append(unknown, c.IP)
		}
	}
	a.mu.Unlock()
	for _, ip := range unknown {
		a.alias(ip)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, c := range a.calls {
		if name, ok := a.aliases[c.IP]; ok {
			c.From = name
		}
	}
	out := make([]call, len(a.calls))
	for i, c := range a.calls {
		out[i] = *c
		end := c.End
		if end.IsZero() {
			end = time.Now()
		}
		out[i].Killed = a.killedBetween(c.IP, c.Start, end)
	}
	return out
}

// inflight returns the calls from replica alias still running.
func (a *agent) inflight(alias string) []call {
	var out []call
	for _, c := range a.snapshot() {
		if c.From == alias && c.End.IsZero() {
			out = append(out, c)
		}
	}
	return out
}

// overlaps lists requests that ran on two live replicas at the same time
// (invariant 3). A call whose replica was killed before the next call of
// the same request started does not count: that worker was not alive.
func (a *agent) overlaps() []string {
	calls := a.snapshot()
	by := map[string][]call{}
	for _, c := range calls {
		by[c.RequestID] = append(by[c.RequestID], c)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	var out []string
	for id, cs := range by {
		sort.Slice(cs, func(i, j int) bool { return cs[i].Start.Before(cs[j].Start) })
		for i := 1; i < len(cs); i++ {
			prev, cur := cs[i-1], cs[i]
			end := prev.End
			if end.IsZero() {
				end = time.Now()
			}
			if !cur.Start.Before(end) || a.killedBetween(prev.IP, prev.Start, cur.Start) {
				continue
			}
			out = append(out, fmt.Sprintf("%s: %s call from %s (%s–%s) overlaps %s call from %s starting %s",
				id, prev.Path, prev.From, prev.Start.Format("15:04:05.000"), end.Format("15:04:05.000"),
				cur.Path, cur.From, cur.Start.Format("15:04:05.000")))
		}
	}
	sort.Strings(out)
	return out
}

// callsFrom counts calls per replica alias that completed with 200 while
// their replica was alive.
func (a *agent) callsFrom() map[string]int {
	out := map[string]int{}
	for _, c := range a.snapshot() {
		if c.Status == http.StatusOK && !c.Killed {
			out[c.From]++
		}
	}
	return out
}
