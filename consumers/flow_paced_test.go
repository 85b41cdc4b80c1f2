package consumers_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/personaq/personaq/consumers"
	"github.com/personaq/personaq/consumers/flow"
	"github.com/personaq/personaq/schemas"
)

// pacingProvider answers each request's first call 503 with Retry-After: 1
// and every later call 200: a healthy provider pacing its callers (the
// compose demo's flaky persona).
type pacingProvider struct {
	mu    sync.Mutex
	seen  map[string]int
	calls int
}

func (p *pacingProvider) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	var env struct {
		Request struct {
			RequestID string `json:"request_id"`
		} `json:"request"`
	}
	_ = json.Unmarshal(body, &env)
	p.mu.Lock()
	p.calls++
	p.seen[env.Request.RequestID]++
	first := p.seen[env.Request.RequestID] == 1
	p.mu.Unlock()
	if first {
		w.Header().Set("Retry-After", "1")
		http.Error(w, `{"error":{"type":"overloaded_error"}}`, http.StatusServiceUnavailable)
		return
	}
	_, _ = w.Write([]byte(`{"output":"done"}`))
}

// The workload: 60 requests pulled together, each answered 503 +
// Retry-After: 1 once and 200 on its retry. The default circuit breaker
// must not open: a paced answer is not an outage (it used to open after 5
// consecutive failures, again and again, turning ~1.2 s of work per
// request into minutes of cool-downs).
func TestCircuitStaysClosedForAPacingProvider(t *testing.T) {
	t.Parallel()
	prov := &pacingProvider{seen: map[string]int{}}
	srv := httptest.NewServer(prov)
	t.Cleanup(srv.Close)
	h, _, circuits := newFlowHarness(t, nil)
	obs := newFlowObs()
	p := httpPersona(t, "flaky", srv.URL, fastPolicy(3))
	p.Concurrency = 60
	p.Circuit = flow.Circuit{Failures: flow.DefaultCircuitFailures} // what every persona gets by default
	h.startMod(func(c *consumers.Config) { c.Circuits, c.Observer = circuits, obs }, p)
	out := h.watchOutcomes()
	start := time.Now()
	var reqs []*schemas.PersonaRequest
	for i := range 60 {
		reqs = append(reqs, h.publish("flaky", fmt.Sprintf("t%d", i)))
	}
	for _, req := range reqs {
		ev := out.wait(t, req.RequestID, 30*time.Second)
		require.Equal(t, schemas.OutcomeSucceeded, ev.Outcome)
		require.Equal(t, 2, ev.Attempts)
	}
	took := time.Since(start)
	obs.mu.Lock()
	opened := len(obs.opened)
	obs.mu.Unlock()
	t.Logf("60 paced requests settled in %s, circuit opened %d times", took.Round(10*time.Millisecond), opened)
	require.Zero(t, opened, "the circuit never opened")
	require.Less(t, took, 15*time.Second, "no cool-down (30 s) was waited")
}
