package metrics_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"

	"github.com/personaq/personaq/cmd/metrics"
	"github.com/personaq/personaq/consumers"
	"github.com/personaq/personaq/consumers/ledger"
	"github.com/personaq/personaq/consumers/wire"
	"github.com/personaq/personaq/handlers"
	"github.com/personaq/personaq/integration/testenv"
	"github.com/personaq/personaq/retry"
	"github.com/personaq/personaq/schemas"
)

// get fetches path from the server and returns status and body.
func get(t *testing.T, base, path string) (int, string) {
	t.Helper()
	resp, err := http.Get(base + path)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(body)
}

// eventuallyStatus waits until path answers code with a body containing want.
func eventuallyStatus(t *testing.T, base, path string, code int, want string, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		got, body := get(t, base, path)
		if got == code && strings.Contains(body, want) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: want %d %q within %s; last answer %d %q", path, code, want, within, got, body)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// scraped is the value of one series line in the text exposition format,
// e.g. `personaq_in_flight{persona="echo"}`; labels are sorted by name.
func scraped(body, series string) (float64, bool) {
	sc := bufio.NewScanner(strings.NewReader(body))
	for sc.Scan() {
		line := sc.Text()
		if rest, ok := strings.CutPrefix(line, series+" "); ok {
			v, err := strconv.ParseFloat(strings.Fields(rest)[0], 64)
			return v, err == nil
		}
	}
	return 0, false
}

func testPolicy(attempts int) retry.Policy {
	return retry.Policy{
		Name: "test", MaxAttempts: attempts, AttemptTimeout: 2 * time.Second,
		Schedule: retry.Linear{Step: 50 * time.Millisecond}, NetworkDelay: 50 * time.Millisecond,
	}
}

// TestServerWithARealRuntime runs a runtime with the Prometheus observer
// against an in-process JetStream and a real Redis, and checks the three
// endpoints through every readiness state: before Run, running, Redis
// down and back, NATS down and back, and stopped.
func TestServerWithARealRuntime(t *testing.T) {
	t.Parallel()
	n := testenv.StartNATS(t)
	rds := testenv.StartRedis(t)
	nc := n.Conn(t)
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	led, err := ledger.New(ledger.Config{Client: rds.Client(t)})
	require.NoError(t, err)

	reg := prometheus.NewRegistry()
	log := zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.WarnLevel)
	rt, err := consumers.New(consumers.Config{
		JetStream: js, Ledger: led, Logger: &log, Observer: metrics.New(reg),
		DrainTimeout: 2 * time.Second, FetchMaxWait: 200 * time.Millisecond,
		Personas: []consumers.Persona{
			{Name: "echo", Handler: handlers.DemoSucceed(0), Policy: testPolicy(3), Concurrency: 4},
			{Name: "flaky", Handler: handlers.DemoFlaky(2, 0), Policy: testPolicy(3), Concurrency: 4},
			{Name: "broken", Handler: handlers.DemoTerminal(), Policy: testPolicy(3), Concurrency: 4},
		},
	})
	require.NoError(t, err)
	reg.MustRegister(metrics.NewRuntimeCollector(func() metrics.RuntimeState { return rt }, 2*time.Second))

	srv, err := metrics.NewServer(metrics.ServerConfig{Addr: "127.0.0.1:0", Gatherer: reg, NATS: nc, Runtime: rt})
	require.NoError(t, err)
	srvCtx, stopSrv := context.WithCancel(context.Background())
	defer stopSrv()
	require.NoError(t, srv.Start(srvCtx))
	base := "http://" + srv.Addr().String()

	t.Run("BeforeRun", func(t *testing.T) {
		code, body := get(t, base, "/healthz")
		require.Equal(t, http.StatusOK, code)
		require.Equal(t, "ok\n", body)
		code, body = get(t, base, "/readyz")
		require.Equal(t, http.StatusServiceUnavailable, code)
		require.Equal(t, "not ready: consumers not bound\n", body, "one line naming the reason")
	})

	runCtx, stopRun := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- rt.Run(runCtx) }()
	defer func() {
		stopRun()
		<-ran
	}()
	eventuallyStatus(t, base, "/readyz", http.StatusOK, "ready", 10*time.Second)

	t.Run("MetricsAfterWork", func(t *testing.T) {
		for i := range 3 {
			publish(t, js, "echo", fmt.Sprintf("task-echo-%d", i))
		}
		publish(t, js, "flaky", "task-flaky")
		publish(t, js, "broken", "task-broken")
		want := map[string]float64{
			`personaq_outcomes_total{outcome="succeeded",persona="echo",reason=""}`:             3,
			`personaq_outcomes_total{outcome="succeeded",persona="flaky",reason=""}`:            1,
			`personaq_outcomes_total{outcome="quarantined",persona="broken",reason="terminal"}`: 1,
			`personaq_quarantined_total{persona="broken",reason="terminal"}`:                    1,
			`personaq_attempts_total{class="succeeded",persona="echo"}`:                         3,
			`personaq_attempts_total{class="retryable",persona="flaky"}`:                        1,
			`personaq_attempts_total{class="succeeded",persona="flaky"}`:                        1,
			`personaq_attempts_total{class="terminal",persona="broken"}`:                        1,
			`personaq_handler_duration_seconds_count{persona="echo"}`:                           3,
			`personaq_redelivery_lateness_seconds_count{persona="flaky"}`:                       1,
			`personaq_in_flight{persona="echo"}`:                                                0,
			`personaq_consumer_pending_messages{persona="echo"}`:                                0,
			`personaq_consumer_ack_pending_messages{persona="broken"}`:                          0,
			`personaq_consumer_info_up`:                                                         1,
			`personaq_ledger_up`:                                                                1,
		}
		var body string
		require.Eventually(t, func() bool {
			_, body = get(t, base, "/metrics")
			for s, v := range want {
				if got, ok := scraped(body, s); !ok || got != v {
					return false
				}
			}
			return true
		}, 15*time.Second, 50*time.Millisecond, "metrics never matched; last scrape:\n%s", grepPersonaq(body))
		begins, ok := scraped(body, `personaq_ledger_round_trip_seconds_count{op="begin"}`)
		require.True(t, ok)
		require.GreaterOrEqual(t, begins, 6.0, "one begin per attempt")
		_, ok = scraped(body, `personaq_ledger_errors_total{op="begin"}`)
		require.False(t, ok, "no ledger error series before an outage")
		_, ok = scraped(body, "process_resident_memory_bytes")
		require.True(t, ok, "process collector")
		_, ok = scraped(body, "go_goroutines")
		require.True(t, ok, "Go collector")
	})

	t.Run("RedisDownAndBack", func(t *testing.T) {
		rds.Stop()
		eventuallyStatus(t, base, "/readyz", http.StatusServiceUnavailable, "not ready: ledger: redis unavailable", 15*time.Second)
		_, body := get(t, base, "/metrics")
		up, ok := scraped(body, "personaq_ledger_up")
		require.True(t, ok)
		require.Equal(t, 0.0, up, "the ledger-unavailable alert reads this")
		code, _ := get(t, base, "/healthz")
		require.Equal(t, http.StatusOK, code, "live while not ready")
		rds.Restart(t)
		eventuallyStatus(t, base, "/readyz", http.StatusOK, "ready", 15*time.Second)
		_, body = get(t, base, "/metrics")
		up, _ = scraped(body, "personaq_ledger_up")
		require.Equal(t, 1.0, up)
	})

	t.Run("NATSDownAndBack", func(t *testing.T) {
		n.Stop()
		eventuallyStatus(t, base, "/readyz", http.StatusServiceUnavailable, "not ready: nats connection", 10*time.Second)
		n.Restart(t)
		eventuallyStatus(t, base, "/readyz", http.StatusOK, "ready", 15*time.Second)
	})

	t.Run("AfterStop", func(t *testing.T) {
		stopRun()
		require.NoError(t, <-ran)
		ran <- nil
		code, body := get(t, base, "/readyz")
		require.Equal(t, http.StatusServiceUnavailable, code)
		require.Equal(t, "not ready: consumers not bound\n", body)
	})

	t.Run("Shutdown", func(t *testing.T) {
		require.NoError(t, srv.Shutdown(context.Background()))
		require.NoError(t, srv.Shutdown(context.Background()), "idempotent")
		require.Error(t, probe(base+"/healthz"), "listener closed")
	})
}

func publish(t *testing.T, js jetstream.JetStream, persona, task string) {
	t.Helper()
	req := schemas.NewRequest(task, "main", persona)
	_, err := wire.PublishRequest(context.Background(), js, wire.Topology{}, req)
	require.NoError(t, err)
}

func grepPersonaq(body string) string {
	var b strings.Builder
	for line := range strings.Lines(body) {
		if strings.HasPrefix(line, "personaq_") {
			b.WriteString(line)
		}
	}
	return b.String()
}

// fakeConn and fakeRuntime let the handler tests set each readiness input.
type fakeConn nats.Status

func (c fakeConn) Status() nats.Status { return nats.Status(c) }

type fakeRuntime struct{ err error }

func (r fakeRuntime) Ready() error { return r.err }

func TestReadyzNamesTheFirstUnmetCondition(t *testing.T) {
	t.Parallel()
	cases := map[string]struct {
		conn nats.Status
		rt   error
		code int
		body string
	}{
		"Ready":        {nats.CONNECTED, nil, http.StatusOK, "ready\n"},
		"Reconnecting": {nats.RECONNECTING, nil, http.StatusServiceUnavailable, "not ready: nats connection RECONNECTING\n"},
		"Closed":       {nats.CLOSED, consumers.ErrNotRunning, http.StatusServiceUnavailable, "not ready: nats connection CLOSED\n"},
		"NotBound":     {nats.CONNECTED, consumers.ErrNotRunning, http.StatusServiceUnavailable, "not ready: consumers not bound\n"},
		"LedgerDown":   {nats.CONNECTED, ledger.ErrUnavailable, http.StatusServiceUnavailable, "not ready: ledger: redis unavailable\n"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			srv, err := metrics.NewServer(metrics.ServerConfig{
				Addr: "127.0.0.1:0", Gatherer: prometheus.NewRegistry(),
				NATS: fakeConn(tc.conn), Runtime: fakeRuntime{tc.rt},
			})
			require.NoError(t, err)
			ctx, cancel := context.WithCancel(context.Background())
			require.NoError(t, srv.Start(ctx))
			base := "http://" + srv.Addr().String()
			code, body := get(t, base, "/readyz")
			require.Equal(t, tc.code, code)
			require.Equal(t, tc.body, body)
			code, _ = get(t, base, "/healthz")
			require.Equal(t, http.StatusOK, code)
			cancel() // ctx ending shuts the server down
			require.Eventually(t, func() bool {
				return probe(base+"/healthz") != nil
			}, 5*time.Second, 10*time.Millisecond)
		})
	}
}

func TestServerConfigErrorsNameTheField(t *testing.T) {
	t.Parallel()
	ok := metrics.ServerConfig{Addr: ":0", Gatherer: prometheus.NewRegistry(), NATS: fakeConn(nats.CONNECTED), Runtime: fakeRuntime{}}
	cases := map[string]func(*metrics.ServerConfig){
		"addr":     func(c *metrics.ServerConfig) { c.Addr = "" },
		"gatherer": func(c *metrics.ServerConfig) { c.Gatherer = nil },
		"nats":     func(c *metrics.ServerConfig) { c.NATS = nil },
		"runtime":  func(c *metrics.ServerConfig) { c.Runtime = nil },
	}
	for field, mutate := range cases {
		cfg := ok
		mutate(&cfg)
		_, err := metrics.NewServer(cfg)
		require.ErrorIs(t, err, metrics.ErrInvalidConfig)
		require.ErrorContains(t, err, field+": required")
	}
}

func TestStartFailsOnATakenPort(t *testing.T) {
	t.Parallel()
	cfg := metrics.ServerConfig{Addr: "127.0.0.1:0", Gatherer: prometheus.NewRegistry(), NATS: fakeConn(nats.CONNECTED), Runtime: fakeRuntime{}}
	first, err := metrics.NewServer(cfg)
	require.NoError(t, err)
	require.NoError(t, first.Start(context.Background()))
	defer first.Shutdown(context.Background())
	cfg.Addr = first.Addr().String()
	second, err := metrics.NewServer(cfg)
	require.NoError(t, err)
	err = second.Start(context.Background())
	require.ErrorContains(t, err, "listen "+cfg.Addr)
	require.Error(t, first.Start(context.Background()), "started twice")
}

// probe GETs url and closes the answer (an unclosed body keeps a
// connection's goroutines alive past the test); nil means it answered.
func probe(url string) error {
	resp, err := http.Get(url)
	if err != nil {
		return err
	}
	_ = resp.Body.Close()
	http.DefaultClient.CloseIdleConnections()
	return nil
}
