//go:build integration

package integration

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
	tclog "github.com/testcontainers/testcontainers-go/log"

	"github.com/personaq/personaq/integration/containers"
)

// suite holds what TestMain found once for every test.
var suite struct {
	skip   string // non-empty: why every test skips
	images containers.Images
	docker string
}

func TestMain(m *testing.M) {
	containers.Setup()
	if os.Getenv("PERSONAQ_TESTCONTAINERS_LOG") == "" {
		// Container lifecycle lines drown the scenario output; set
		// PERSONAQ_TESTCONTAINERS_LOG=1 to see them.
		tclog.SetDefault(tclog.NewNoopLogger())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	version, err := containers.CheckDocker(ctx)
	cancel()
	if err != nil {
		err = errors.New(strings.Join(strings.Fields(err.Error()), " ")) // one line
	}
	switch {
	case err != nil && os.Getenv("CI") != "":
		fmt.Fprintf(os.Stderr, "integration: FAIL: %v (CI is set, so a missing Docker engine is a failure)\n", err)
		os.Exit(1)
	case err != nil:
		suite.skip = fmt.Sprintf("integration: skipped: %v", err)
		fmt.Println(suite.skip)
	default:
		suite.docker = version
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		suite.images, err = containers.ResolveImages(ctx)
		cancel()
		if err != nil {
			fmt.Fprintf(os.Stderr, "integration: FAIL: %v\n", err)
			os.Exit(1)
		}
		fmt.Printf("integration: %s; images: nats=%s redis=%s personaq=%s\n",
			version, suite.images.NATS, suite.images.Redis, suite.images.Personaq)
	}
	code := m.Run()
	printResults()
	printFaultResults()
	os.Exit(code)
}

// env is one test's cluster: a network, NATS, Redis, replicas, and the
// host-side clients that publish and observe.
type env struct {
	t     testing.TB
	ctx   context.Context
	net   *containers.Network
	nats  *containers.NATS
	redis *containers.Redis
	nc    *nats.Conn
	js    jetstream.JetStream
	rdb   *redis.Client
	obs   *observer
	agent *agent

	mu       sync.Mutex
	replicas map[string]*containers.Replica
	order    []string
}

// newEnv starts a network, NATS and Redis for t and removes everything
// when t ends. With no Docker engine it skips t.
func newEnv(t testing.TB) *env {
	t.Helper()
	if suite.skip != "" {
		t.Skip(suite.skip)
	}
	ctx, cancel := context.WithCancel(context.Background())
	e := &env{t: t, ctx: ctx, replicas: map[string]*containers.Replica{}}
	t.Cleanup(func() {
		e.dumpLogs()
		cleanup, done := context.WithTimeout(context.Background(), 2*time.Minute)
		defer done()
		e.mu.Lock()
		reps := make([]*containers.Replica, 0, len(e.replicas))
		for _, r := range e.replicas {
			reps = append(reps, r)
		}
		e.mu.Unlock()
		var wg sync.WaitGroup
		for _, r := range reps {
			wg.Go(func() {
				if err := r.Terminate(cleanup); err != nil {
					t.Logf("terminate replica %s: %v", r.Alias(), err)
				}
			})
		}
		wg.Wait()
		if e.nc != nil {
			e.nc.Close()
		}
		if e.rdb != nil {
			_ = e.rdb.Close()
		}
		if e.agent != nil {
			e.agent.close()
		}
		if e.redis != nil {
			if err := e.redis.Terminate(cleanup); err != nil {
				t.Logf("terminate redis: %v", err)
			}
		}
		if e.nats != nil {
			if err := e.nats.Terminate(cleanup); err != nil {
				t.Logf("terminate nats: %v", err)
			}
		}
		if err := e.net.Remove(cleanup); err != nil {
			t.Logf("%v", err)
		}
		cancel()
	})
	var err error
	e.net, err = containers.NewNetwork(ctx)
	require.NoError(t, err)
	var wg sync.WaitGroup
	var natsErr, redisErr error
	wg.Go(func() {
		e.nats, natsErr = containers.StartNATS(ctx, containers.NATSOptions{Image: suite.images.NATS, Network: e.net})
	})
	wg.Go(func() {
		e.redis, redisErr = containers.StartRedis(ctx, containers.RedisOptions{Image: suite.images.Redis, Network: e.net})
	})
	wg.Wait()
	require.NoError(t, errors.Join(natsErr, redisErr))
	e.nc, err = nats.Connect(e.nats.URL(), nats.Name("personaq-integration"),
		nats.MaxReconnects(-1), nats.ReconnectWait(100*time.Millisecond), nats.Timeout(5*time.Second))
	require.NoError(t, err)
	e.js, err = jetstream.New(e.nc)
	require.NoError(t, err)
	e.rdb = redis.NewClient(&redis.Options{Addr: e.redis.Addr()})
	e.obs = newObserver(e.js)
	return e
}

// startAgent serves the test's HTTP persona endpoints on the network's
// gateway address (see agent).
func (e *env) startAgent() *agent {
	e.t.Helper()
	a, err := newAgent(e.net.Gateway, e.replicaByIP)
	require.NoError(e.t, err)
	e.agent = a
	return a
}

// replica starts `personaq serve` named alias with config.
func (e *env) replica(alias, config string) *containers.Replica {
	e.t.Helper()
	r, err := e.startReplica(alias, config)
	require.NoError(e.t, err)
	return r
}

func (e *env) startReplica(alias, config string, with ...func(*containers.ReplicaOptions)) (*containers.Replica, error) {
	start := time.Now()
	opts := containers.ReplicaOptions{
		Image: suite.images.Personaq, Network: e.net, Alias: alias, Config: config,
		StopTimeout: 20 * time.Second, Probes: true,
	}
	for _, f := range with {
		f(&opts)
	}
	r, err := containers.StartReplica(e.ctx, opts)
	if r != nil {
		e.mu.Lock()
		e.replicas[alias] = r
		e.order = append(e.order, alias)
		e.mu.Unlock()
	}
	if err == nil {
		e.t.Logf("replica %s ready in %s", alias, time.Since(start).Round(time.Millisecond))
	}
	return r, err
}

// replicas starts n replicas named prefix-1..n in parallel.
func (e *env) startReplicas(prefix string, n int, config string) []*containers.Replica {
	e.t.Helper()
	out := make([]*containers.Replica, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { out[i], errs[i] = e.startReplica(fmt.Sprintf("%s-%d", prefix, i+1), config) })
	}
	wg.Wait()
	require.NoError(e.t, errors.Join(errs...))
	return out
}

// replicaByIP names the replica whose address on the network is ip.
func (e *env) replicaByIP(ip string) *containers.Replica {
	e.mu.Lock()
	reps := make([]*containers.Replica, 0, len(e.replicas))
	for _, r := range e.replicas {
		reps = append(reps, r)
	}
	e.mu.Unlock()
	for _, r := range reps {
		if rip, err := r.IP(e.ctx, e.net); err == nil && rip == ip {
			return r
		}
	}
	return nil
}

// dumpLogs writes every replica's full log to a directory and, when the
// test failed, the tail of each to the test log.
func (e *env) dumpLogs() {
	e.mu.Lock()
	order := append([]string(nil), e.order...)
	e.mu.Unlock()
	dir := filepath.Join(os.TempDir(), "personaq-integration", sanitize(e.t.Name())+"-"+time.Now().Format("150405"))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, name := range order {
		logs, err := e.replicas[name].Logs(ctx)
		if err != nil {
			continue
		}
		_ = os.WriteFile(filepath.Join(dir, name+".log"), []byte(logs), 0o644)
		if e.t.Failed() {
			e.t.Logf("---- %s (last 25 lines; full log in %s) ----\n%s", name, dir, containers.Tail(logs, 25))
		}
	}
	servers := map[string]*containers.Node{}
	if e.nats != nil {
		servers["nats"] = &e.nats.Node
	}
	if e.redis != nil {
		servers["redis"] = &e.redis.Node
	}
	for name, n := range servers {
		if logs, err := n.Logs(ctx); err == nil {
			_ = os.WriteFile(filepath.Join(dir, name+".log"), []byte(logs), 0o644)
		}
	}
	e.t.Logf("container logs: %s", dir)
}

var unsafeName = regexp.MustCompile(`[^A-Za-z0-9_.-]+`)

func sanitize(s string) string { return unsafeName.ReplaceAllString(s, "_") }

// countLog counts lines containing substr in the logs of the named replicas
// (all when none are named).
func (e *env) countLog(substr string, names ...string) int {
	if len(names) == 0 {
		e.mu.Lock()
		names = append(names, e.order...)
		e.mu.Unlock()
	}
	n := 0
	for _, name := range names {
		logs, err := e.replicas[name].Logs(e.ctx)
		require.NoError(e.t, err)
		n += strings.Count(logs, substr)
	}
	return n
}

// result is one scenario's line in the summary TestMain prints.
type result struct {
	name    string
	elapsed time.Duration
	t       tally
	notes   []string
}

var (
	resultsMu sync.Mutex
	results   []result
)

func record(t *testing.T, start time.Time, tl tally, notes ...string) {
	r := result{name: t.Name(), elapsed: time.Since(start), t: tl, notes: notes}
	t.Logf("RESULT %s: %s in %s; %s", r.name, tl, r.elapsed.Round(100*time.Millisecond), strings.Join(notes, "; "))
	resultsMu.Lock()
	results = append(results, r)
	resultsMu.Unlock()
}

// printResults prints the scenarios' table (integration/README.md's "Fault
// scenarios" counts) and writes it to personaq-integration/summary.md
// under the temporary directory.
func printResults() {
	resultsMu.Lock()
	defer resultsMu.Unlock()
	if len(results) == 0 {
		return
	}
	var b strings.Builder
	fmt.Fprintln(&b, "| scenario | published | succeeded | quarantined (by reason) | attempts | deliveries | redelivered (not a counted attempt) | time | notes |")
	fmt.Fprintln(&b, "|---|---|---|---|---|---|---|---|---|")
	for _, r := range results {
		fmt.Fprintf(&b, "| %s | %d | %d | %s | %d | %d | %d (%s) | %.1fs | %s |\n", r.name, r.t.published, r.t.succeeded,
			r.t.reasons(), r.t.attempts, r.t.deliveries, r.t.redelivered(), r.t.infra(),
			r.elapsed.Seconds(), strings.Join(r.notes, "; "))
	}
	path := filepath.Join(os.TempDir(), "personaq-integration", "summary.md")
	_ = os.MkdirAll(filepath.Dir(path), 0o755)
	_ = os.WriteFile(path, []byte(b.String()), 0o644)
	fmt.Printf("\n%s\n(also in %s)\n", b.String(), path)
}

// sortedKeys returns m's keys in order.
func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// waitFor polls cond every 50ms until it holds, failing after timeout.
func (e *env) waitFor(what string, timeout time.Duration, cond func() bool) {
	e.t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			e.t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
