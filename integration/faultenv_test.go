//go:build integration

package integration

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/personaq/personaq/consumers"
	"github.com/personaq/personaq/consumers/wire"
	"github.com/personaq/personaq/integration/testenv"
	"github.com/personaq/personaq/schemas"
)

// faultAckWait is the fault personas' ack wait (and lease TTL).
const faultAckWait = 2 * time.Second

// slowAckWait is the ack wait of the persona whose held retries must
// survive a consumer leader failover in seconds, not an AckWait.
const slowAckWait = 60 * time.Second

// faultPersonas are the suite's personas: the persona script in one mode,
// 1 s of work (or workS seconds), with the attempts each may take (and an
// ack wait other than faultAckWait).
var faultPersonas = map[string]struct {
	mode        string
	maxAttempts int
	retryAfter  string
	ackWait     time.Duration
	workS       string
}{
	"ok":        {"ok", 3, "200ms", 0, ""},
	"failonce":  {"failonce", 3, "200ms", 0, ""},
	"termonce":  {"termonce", 3, "200ms", 0, ""},
	"max2":      {"failonce", 2, "200ms", 0, ""},
	"failall":   {"failall", 3, "200ms", 0, ""},
	"retrylate": {"failonce", 3, "3s", 0, ""},
	"retryslow": {"failonce", 3, "3s", slowAckWait, ""},
	// long outlasts several lease TTLs: an agent that outlived its claim
	// would still run beside the rerun.
	"long": {"ok", 3, "200ms", 0, "8"},
}

// faultEnv is one fault scenario: nats-server process(es), a redis-server,
// replicas, the persona's run log and a client that publishes and observes.
type faultEnv struct {
	t      *testing.T
	ctx    context.Context
	dir    string
	nats   []*natsProc
	redis  *testenv.Redis
	rdb    *redis.Client
	nc     *nats.Conn
	js     jetstream.JetStream
	obs    *observer
	runlog string
	script string
	start  time.Time

	mu    sync.Mutex
	clip  map[int]time.Time // agent pid → when it stopped running (no end line: stopped or killed)
	notes []string
}

// newFaultEnv starts nodes nats-servers (a cluster when > 1) and a Redis.
func newFaultEnv(t *testing.T, nodes int) *faultEnv {
	t.Helper()
	e := &faultEnv{t: t, ctx: waitCtx(t, 10*time.Minute), dir: t.TempDir(), clip: map[int]time.Time{}, start: time.Now()}
	e.runlog = filepath.Join(e.dir, "runs.log")
	e.script = filepath.Join(e.dir, "persona.sh")
	require.NoError(t, os.WriteFile(e.script, []byte(personaScript), 0o755))
	t.Cleanup(e.keepLogs)
	e.nats = startNATSProcs(t, nodes)
	e.redis = testenv.StartRedis(t)
	e.rdb = e.redis.Client(t)
	var urls []string
	for _, n := range e.nats {
		urls = append(urls, n.url())
	}
	var err error
	e.nc, err = nats.Connect(strings.Join(urls, ","), nats.Name("personaq-faults"), nats.MaxReconnects(-1),
		nats.ReconnectWait(50*time.Millisecond), nats.Timeout(2*time.Second))
	require.NoError(t, err)
	t.Cleanup(e.nc.Close)
	e.js, err = jetstream.New(e.nc)
	require.NoError(t, err)
	waitUntil(t, "JetStream ready", 60*time.Second, func() bool {
		ctx, cancel := context.WithTimeout(e.ctx, time.Second)
		defer cancel()
		_, err := e.js.AccountInfo(ctx)
		return err == nil
	})
	e.obs = newObserver(e.js)
	return e
}

// config is a replica's personaq.yaml: every fault persona, concurrency
// per persona and replica. The kill grace leaves the persona script's
// SIGTERM trap time to log its end on a loaded machine (it forks date):
// a run without an end line reads as an agent left running.
func (e *faultEnv) config(concurrency int) string {
	var urls []string
	for _, n := range e.nats {
		urls = append(urls, n.url())
	}
	var b strings.Builder
	fmt.Fprintf(&b, "nats:\n  urls: [%s]\nredis:\n  url: %s\n  ttl: 1h\n", strings.Join(urls, ", "), e.redis.URL())
	fmt.Fprintf(&b, "topology:\n  replicas: %d\nruntime:\n  drain_timeout: 5s\n  fetch_max_wait: 250ms\n", len(e.nats))
	fmt.Fprintf(&b, "defaults:\n  concurrency: %d\n  max_replicas: 4\npersonas:\n", concurrency)
	for _, name := range sortedKeys(faultPersonas) {
		p := faultPersonas[name]
		ackWait := faultAckWait
		if p.ackWait > 0 {
			ackWait = p.ackWait
		}
		work := "1"
		if p.workS != "" {
			work = p.workS
		}
		fmt.Fprintf(&b, `  %s:
    invoker:
      type: command
      path: %s
      args: [%s]
      env: {RUNLOG: %q, WORK_S: %q}
      kill_grace: 500ms
    timeout: 10s
    ack_wait: %s
    policy: {preset: persona, max_attempts: %d, schedule: {type: fixed, every: %s}}
`, name, e.script, p.mode, e.runlog, work, ackWait, p.maxAttempts, p.retryAfter)
	}
	return b.String()
}

// replicas starts n replicas named prefix-1..n.
func (e *faultEnv) replicas(prefix string, n, concurrency int) []*replicaProc {
	e.t.Helper()
	out := make([]*replicaProc, n)
	for i := range out {
		out[i] = startReplicaProc(e.t, fmt.Sprintf("%s-%d", prefix, i+1), e.dir, e.config(concurrency))
		if len(e.nats) > 1 {
			// On a fresh cluster, replicas provisioning the same R3 stream at
			// once can both time out (and exit): start them one by one.
			out[i].waitReady(e.t)
		}
	}
	for _, r := range out {
		r.waitReady(e.t)
	}
	return out
}

// requests builds n requests of each persona named.
func (e *faultEnv) requests(prefix string, n int, personas ...string) []*schemas.PersonaRequest {
	var out []*schemas.PersonaRequest
	for _, p := range personas {
		out = append(out, newRequests(prefix, p, n, "")...)
	}
	return out
}

// publish publishes reqs, retrying while NATS is unavailable.
func (e *faultEnv) publish(reqs ...*schemas.PersonaRequest) {
	e.t.Helper()
	for _, r := range reqs {
		e.publishMsg(r, r.RequestID)
	}
}

// publishMsg publishes r under Nats-Msg-Id msgID.
func (e *faultEnv) publishMsg(r *schemas.PersonaRequest, msgID string) {
	e.t.Helper()
	data, err := schemas.Encode(r)
	require.NoError(e.t, err)
	deadline := time.Now().Add(60 * time.Second)
	for {
		msg := &nats.Msg{Subject: topo.RequestSubject(r.Persona), Data: data, Header: nats.Header{}}
		msg.Header.Set(jetstream.MsgIDHeader, msgID)
		ctx, cancel := context.WithTimeout(e.ctx, 3*time.Second)
		_, err := e.js.PublishMsg(ctx, msg)
		cancel()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("publish %s: %v", r.RequestID, err)
		}
		waitUntil(e.t, "a publish retry", time.Second, func() bool { return e.nc.IsConnected() })
	}
}

// runs reads the persona's run log.
func (e *faultEnv) runs() map[string][]*personaRun {
	e.t.Helper()
	runs, err := readRuns(e.runlog)
	require.NoError(e.t, err)
	return runs
}

// started reports whether every request has at least one run.
func (e *faultEnv) started(reqs []*schemas.PersonaRequest) bool {
	runs := e.runs()
	for _, r := range reqs {
		if len(runs[r.RequestID]) == 0 {
			return false
		}
	}
	return true
}

// clipped notes that agents stopped running at (about) at without logging
// an end: stopped by SIGSTOP, or killed by SIGKILL.
func (e *faultEnv) clipped(pids []int, at time.Time) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, p := range pids {
		e.clip[p] = at
	}
}

func (e *faultEnv) note(format string, args ...any) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.notes = append(e.notes, fmt.Sprintf(format, args...))
}

// settledCount counts the requests with a terminal record.
func (e *faultEnv) settledCount(reqs []*schemas.PersonaRequest) int {
	n := 0
	for _, r := range reqs {
		if e.obs.outcome(r.RequestID) != nil {
			n++
		}
	}
	return n
}

// faultResult is one scenario's figures.
type faultResult struct {
	requests, runs, attempts, overlaps int
	outcomes                           map[string]int
}

// check waits until every request has its terminal record and the work
// queue is empty, then checks each request: exactly one terminal record
// (the terminal event: one message on its outcomes subject), one
// quarantine record if and only if it did not succeed, the record's
// attempts and the persona's runs within its maximum, no two runs
// overlapping in time, no run left without an end. Nothing lost: the
// requests stream and its consumers hold nothing.
func (e *faultEnv) check(reqs []*schemas.PersonaRequest, timeout time.Duration) faultResult {
	e.t.Helper()
	waitUntil(e.t, "every request's terminal record", timeout, func() bool {
		if err := e.obs.poll(e.ctx); err != nil {
			return false
		}
		return e.settledCount(reqs) == len(reqs)
	})
	waitUntil(e.t, "the requests stream drained", 30*time.Second, func() bool {
		ok, _ := faultDrained(e.ctx, e.js)
		return ok
	})
	require.NoError(e.t, e.obs.poll(e.ctx))

	res := faultResult{requests: len(reqs), outcomes: map[string]int{}}
	runs := e.runs()
	var bad []string
	for _, r := range reqs {
		max := faultPersonas[r.Persona].maxAttempts
		e.obs.mu.Lock()
		evs := append([]*schemas.OutcomeEvent(nil), e.obs.outcomes[r.RequestID]...)
		recs := append([]*schemas.QuarantineRecord(nil), e.obs.records[r.RequestID]...)
		e.obs.mu.Unlock()
		if len(evs) != 1 {
			bad = append(bad, fmt.Sprintf("%s (%s): %d terminal records", r.RequestID, r.Persona, len(evs)))
			continue
		}
		ev := evs[0]
		res.outcomes[string(ev.Outcome)]++
		res.attempts += ev.Attempts
		quarantines := ev.Outcome != schemas.OutcomeSucceeded && ev.Outcome != schemas.OutcomeCancelled
		switch {
		case !quarantines && len(recs) != 0:
			bad = append(bad, fmt.Sprintf("%s (%s): %s AND %d quarantine record(s)", r.RequestID, r.Persona, ev.Outcome, len(recs)))
		case quarantines && len(recs) != 1:
			bad = append(bad, fmt.Sprintf("%s (%s): %s with %d quarantine records", r.RequestID, r.Persona, ev.Outcome, len(recs)))
		}
		if ev.Attempts > max {
			bad = append(bad, fmt.Sprintf("%s (%s): record says %d attempts, max %d", r.RequestID, r.Persona, ev.Attempts, max))
		}
		rs := runs[r.RequestID]
		res.runs += len(rs)
		if len(rs) > max {
			bad = append(bad, fmt.Sprintf("%s (%s): ran %d times, max %d attempts", r.RequestID, r.Persona, len(rs), max))
		}
		if len(rs) == 0 && ev.Outcome != schemas.OutcomeCancelled {
			bad = append(bad, fmt.Sprintf("%s (%s): %s without a run", r.RequestID, r.Persona, ev.Outcome))
		}
		for _, o := range e.overlaps(rs) {
			res.overlaps++
			bad = append(bad, fmt.Sprintf("%s (%s): runs overlap: %s", r.RequestID, r.Persona, o))
		}
	}
	require.Empty(e.t, bad, "fault suite invariants")
	return res
}

// overlaps returns the pairs of rs that ran at the same time. A run
// without an end line ended when the test stopped or killed its agent
// (clip); one with neither is an agent left running.
func (e *faultEnv) overlaps(rs []*personaRun) []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	end := func(r *personaRun) (time.Time, bool) {
		if c, ok := e.clip[r.pid]; ok && (r.end.IsZero() || c.Before(r.end)) {
			return c, true
		}
		return r.end, !r.end.IsZero()
	}
	var out []string
	sorted := append([]*personaRun(nil), rs...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].start.Before(sorted[j].start) })
	for i, a := range sorted {
		aEnd, ok := end(a)
		if !ok {
			out = append(out, fmt.Sprintf("attempt %d (pid %d) never ended", a.attempt, a.pid))
			continue
		}
		for _, b := range sorted[i+1:] {
			if b.start.Before(aEnd) {
				out = append(out, fmt.Sprintf("attempt %d (pid %d, %s–%s) and attempt %d (pid %d, from %s)",
					a.attempt, a.pid, a.start.Format("15:04:05.000"), aEnd.Format("15:04:05.000"),
					b.attempt, b.pid, b.start.Format("15:04:05.000")))
			}
		}
	}
	return out
}

// record logs the scenario's RESULT line and adds it to the summary.
func (e *faultEnv) record(res faultResult) {
	e.t.Helper()
	elapsed := time.Since(e.start)
	e.mu.Lock()
	notes := strings.Join(e.notes, "; ")
	e.mu.Unlock()
	line := fmt.Sprintf("requests %d, outcomes %v, attempts %d, runs %d, overlaps %d, in %s; %s",
		res.requests, res.outcomes, res.attempts, res.runs, res.overlaps, elapsed.Round(100*time.Millisecond), notes)
	e.t.Logf("FAULT RESULT %s: %s", e.t.Name(), line)
	faultResultsMu.Lock()
	faultResults = append(faultResults, fmt.Sprintf("| %s | %d | %s | %d | %d | %d | %.1fs | %s |", e.t.Name(), res.requests,
		outcomesText(res.outcomes), res.attempts, res.runs, res.overlaps, elapsed.Seconds(), notes))
	faultResultsMu.Unlock()
}

var (
	faultResultsMu sync.Mutex
	faultResults   []string
)

func outcomesText(m map[string]int) string {
	var parts []string
	for _, k := range sortedKeys(m) {
		parts = append(parts, fmt.Sprintf("%s %d", k, m[k]))
	}
	return strings.Join(parts, ", ")
}

// printFaultResults prints the fault suite's table (integration/README.md).
func printFaultResults() {
	faultResultsMu.Lock()
	defer faultResultsMu.Unlock()
	if len(faultResults) == 0 {
		return
	}
	sort.Strings(faultResults)
	fmt.Printf("\n| fault scenario | requests | outcomes | attempts (records) | runs (persona log) | overlaps | time | notes |\n|---|---|---|---|---|---|---|---|\n%s\n",
		strings.Join(faultResults, "\n"))
}

// faultDrained reports whether the requests stream is empty and no
// consumer has anything pending.
func faultDrained(ctx context.Context, js jetstream.JetStream) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	s, err := js.Stream(ctx, topo.RequestsStream)
	if err != nil {
		return false, err
	}
	info, err := s.Info(ctx)
	if err != nil {
		return false, err
	}
	ok := info.State.Msgs == 0
	lister := s.ListConsumers(ctx)
	for ci := range lister.Info() {
		ok = ok && ci.NumPending == 0 && ci.NumAckPending == 0
	}
	if err := lister.Err(); err != nil && !errors.Is(err, jetstream.ErrEndOfData) {
		return false, err
	}
	return ok, nil
}

// requestsOf returns the requests whose runs the agents pids ran.
func (e *faultEnv) requestsOf(pids []int) []string {
	var out []string
	for id, rs := range e.runs() {
		for _, r := range rs {
			if slices.Contains(pids, r.pid) {
				out = append(out, id)
				break
			}
		}
	}
	return out
}

// rerunAfter reports whether each of ids ran again after at, or has its
// terminal record.
func (e *faultEnv) rerunAfter(ids []string, at time.Time) bool {
	_ = e.obs.poll(e.ctx)
	runs := e.runs()
	for _, id := range ids {
		if e.obs.outcome(id) != nil {
			continue
		}
		if !slices.ContainsFunc(runs[id], func(r *personaRun) bool { return r.start.After(at) }) {
			return false
		}
	}
	return true
}

// countLines counts the lines of the file at path containing substr.
func countLines(path, substr string) int {
	b, _ := os.ReadFile(path)
	return strings.Count(string(b), substr)
}

// keepLogs copies the replicas', servers' and persona's logs to
// $TMPDIR/personaq-integration/<test>-<time>/ (they run in t's temporary
// directory, removed when it ends).
func (e *faultEnv) keepLogs() {
	dir := filepath.Join(os.TempDir(), "personaq-integration", sanitize(e.t.Name())+"-"+time.Now().Format("150405"))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return
	}
	logs, _ := filepath.Glob(filepath.Join(e.dir, "*.log"))
	for _, n := range e.nats {
		logs = append(logs, n.log)
	}
	for _, l := range logs {
		name := filepath.Base(l)
		if name == "nats.log" {
			name = filepath.Base(filepath.Dir(l)) + "-nats.log"
		}
		if b, err := os.ReadFile(l); err == nil {
			_ = os.WriteFile(filepath.Join(dir, name), b, 0o644)
		}
	}
	e.t.Logf("logs: %s", dir)
}

// consumerLeader names the server leading the durable consumer of persona
// on the requests stream ("" while none does).
func (e *faultEnv) consumerLeader(persona string) string {
	ctx, cancel := context.WithTimeout(e.ctx, 2*time.Second)
	defer cancel()
	c, err := e.js.Consumer(ctx, topo.RequestsStream, wire.Durable(persona))
	if err != nil {
		return ""
	}
	info, err := c.Info(ctx)
	if err != nil || info.Cluster == nil {
		return ""
	}
	return info.Cluster.Leader
}

// provision creates the streams (R = the number of nodes) before any
// replica starts, as `personaq streams init` does.
func (e *faultEnv) provision() {
	e.t.Helper()
	// A fresh cluster answers JetStream requests before every peer is
	// known to be online; until then an R3 stream cannot be placed ("no
	// suitable peers for placement"), so the first provisioning is repeated.
	var err error
	waitUntil(e.t, "the cluster places the streams", time.Minute, func() bool {
		ctx, cancel := context.WithTimeout(e.ctx, 10*time.Second)
		defer cancel()
		err = consumers.Provision(ctx, e.js, wire.Topology{Replicas: len(e.nats)}, nil)
		return err == nil
	})
	require.NoError(e.t, err)
}

// node is the nats-server process named name (n1, n2, …), nil if none.
func (e *faultEnv) node(name string) *natsProc {
	for i, n := range e.nats {
		if name == fmt.Sprintf("n%d", i+1) {
			return n
		}
	}
	return nil
}

// retryLateness is the longest wait past delay between an attempt's end
// and the next attempt's start, over reqs.
func (e *faultEnv) retryLateness(reqs []*schemas.PersonaRequest, delay time.Duration) time.Duration {
	runs := e.runs()
	var worst time.Duration
	for _, r := range reqs {
		rs := runs[r.RequestID]
		for i := 1; i < len(rs); i++ {
			if rs[i-1].end.IsZero() {
				continue
			}
			worst = max(worst, rs[i].start.Sub(rs[i-1].end)-delay)
		}
	}
	return worst
}
