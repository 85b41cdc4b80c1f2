package api_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"

	"github.com/personaq/personaq/consumers"
	"github.com/personaq/personaq/consumers/client"
	"github.com/personaq/personaq/handlers"
	"github.com/personaq/personaq/integration/testenv"
	"github.com/personaq/personaq/retry"
	"github.com/personaq/personaq/schemas"
)

// noop answers its input at once: what is measured is personaq, not a
// persona.
func noop() consumers.Persona {
	p := retry.PersonaPolicy(10 * time.Second)
	return consumers.Persona{Name: "noop", Policy: p, Concurrency: 128, MaxReplicas: 1, Handler: handlers.Func(
		func(_ context.Context, req *handlers.Request) (handlers.Result, error) {
			return handlers.Result{Output: req.Message.Input}, nil
		})}
}

// latencies collects per-operation durations and reports p50 and p99.
type latencies struct {
	mu sync.Mutex
	d  []time.Duration
}

func (l *latencies) add(d time.Duration) {
	l.mu.Lock()
	l.d = append(l.d, d)
	l.mu.Unlock()
}

func (l *latencies) report(b *testing.B) {
	slices.Sort(l.d)
	if len(l.d) == 0 {
		return
	}
	q := func(p float64) float64 { return float64(l.d[int(p*float64(len(l.d)-1))].Microseconds()) / 1000 }
	b.ReportMetric(q(0.50), "p50_ms")
	b.ReportMetric(q(0.99), "p99_ms")
	b.ReportMetric(0, "ns/op")
}

// BenchmarkSubmitAwait: one no-op request submitted and awaited until its
// terminal record, over HTTP (POST, then GET ?wait=30s) and with the Go
// client's Run, on the same NATS, runtime and process; one at a time and
// 64 callers at once. Run:
//
//	go test -run '^$' -bench BenchmarkSubmitAwait -benchtime 2000x ./cmd/api/
func BenchmarkSubmitAwait(b *testing.B) {
	e := &env{t: b, log: zerolog.Nop()}
	e.nats = testenv.StartNATS(b)
	e.js = e.nats.JetStream(b)
	e.serve(noop())
	e.api, e.http = e.startAPI(e.js)
	c, err := client.New(client.Config{JetStream: e.js})
	require.NoError(b, err)
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 128}}
	viaHTTP := func(i int64) error {
		body := fmt.Sprintf(`{"persona":"noop","task_id":"bench","input":{"i":%d}}`, i)
		req, _ := http.NewRequest("POST", e.http.URL+"/v1/requests", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+allToken)
		resp, err := hc.Do(req)
		if err != nil {
			return err
		}
		var st struct {
			RequestID string `json:"request_id"`
		}
		err = json.NewDecoder(resp.Body).Decode(&st)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusCreated {
			return fmt.Errorf("submit: %d %v", resp.StatusCode, err)
		}
		for {
			req, _ := http.NewRequest("GET", e.http.URL+"/v1/requests/"+st.RequestID+"?wait=30s", nil)
			req.Header.Set("Authorization", "Bearer "+allToken)
			resp, err := hc.Do(req)
			if err != nil {
				return err
			}
			var got struct {
				Record *schemas.OutcomeEvent `json:"record"`
			}
			err = json.NewDecoder(resp.Body).Decode(&got)
			resp.Body.Close()
			if err != nil {
				return err
			}
			if got.Record != nil {
				return nil
			}
		}
	}
	viaGo := func(i int64) error {
		req := schemas.NewRequest("bench", "main", "noop")
		req.Input = json.RawMessage(fmt.Sprintf(`{"i":%d}`, i))
		_, err := c.Run(context.Background(), req)
		return err
	}
	for _, path := range []struct {
		name string
		run  func(int64) error
	}{{"HTTP", viaHTTP}, {"GoClient", viaGo}} {
		for _, callers := range []int{1, 64} {
			b.Run(fmt.Sprintf("%s/callers=%d", path.name, callers), func(b *testing.B) {
				var lat latencies
				var next atomic.Int64
				var wg sync.WaitGroup
				errs := make(chan error, callers)
				b.ResetTimer()
				for range callers {
					wg.Add(1)
					go func() {
						defer wg.Done()
						for i := next.Add(1); i <= int64(b.N); i = next.Add(1) {
							t0 := time.Now()
							if err := path.run(i); err != nil {
								errs <- err
								return
							}
							lat.add(time.Since(t0))
						}
					}()
				}
				wg.Wait()
				b.StopTimer()
				close(errs)
				for err := range errs {
					b.Fatal(err)
				}
				lat.report(b)
				b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "req/s")
			})
		}
	}
}

// BenchmarkLongPolls10k: 10,000 callers long-poll (GET ?wait=60s) 10,000
// distinct queued requests on ONE `personaq api` process (the built
// binary, on the runtime's NATS); reported: the process's peak RSS
// (VmHWM) and the CPU it used while they connected and waited. Run:
//
//	go test -run '^$' -bench BenchmarkLongPolls10k -benchtime 1x -timeout 20m ./cmd/api/
func BenchmarkLongPolls10k(b *testing.B) {
	const polls = 10_000
	n := testenv.StartNATS(b)
	js := n.JetStream(b)
	e := &env{t: b, nats: n, js: js, log: zerolog.Nop()}
	hold := noop()
	hold.Name, hold.Concurrency = "held", 1
	hold.Handler = handlers.Func(func(ctx context.Context, _ *handlers.Request) (handlers.Result, error) {
		<-ctx.Done() // keeps its requests queued behind it for the whole run
		return handlers.Result{}, ctx.Err()
	})
	hold.Policy.AttemptTimeout = 10 * time.Minute
	e.serve(hold)
	c, err := client.New(client.Config{JetStream: js})
	require.NoError(b, err)
	ids := make([]string, polls)
	var wg sync.WaitGroup
	sem := make(chan struct{}, 64)
	for i := range ids {
		req := schemas.NewRequest("lp", "main", "held")
		ids[i] = req.RequestID
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			_, err := c.Submit(context.Background(), req, client.WithDeadline(time.Now().Add(time.Hour)))
			require.NoError(b, err)
		}()
	}
	wg.Wait()

	base, proc := startAPIProcess(b, n.URL())
	cpu0 := procCPU(b, proc.Pid)
	b.ResetTimer()
	for range b.N {
		var waiting, done atomic.Int64
		ctx, cancel := context.WithCancel(context.Background())
		tr := &http.Transport{MaxIdleConnsPerHost: polls, MaxConnsPerHost: 0, DialContext: (&net.Dialer{}).DialContext}
		hc := &http.Client{Transport: tr}
		for _, id := range ids {
			wg.Add(1)
			go func() {
				defer wg.Done()
				req, _ := http.NewRequestWithContext(ctx, "GET", base+"/v1/requests/"+id+"?wait=60s", nil)
				req.Header.Set("Authorization", "Bearer "+allToken)
				waiting.Add(1)
				resp, err := hc.Do(req)
				if err == nil {
					_, _ = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					done.Add(1)
				}
			}()
		}
		time.Sleep(20 * time.Second) // every long-poll connected and waiting
		rss := procStatus(b, proc.Pid, "VmHWM:")
		now := procStatus(b, proc.Pid, "VmRSS:")
		cpu := procCPU(b, proc.Pid) - cpu0
		require.Zero(b, done.Load(), "no long-poll returned early")
		cancel()
		wg.Wait()
		tr.CloseIdleConnections()
		b.ReportMetric(float64(rss)/1024, "peak_rss_MB")
		b.ReportMetric(float64(now)/1024, "rss_waiting_MB")
		b.ReportMetric(cpu.Seconds(), "cpu_s")
		b.ReportMetric(float64(waiting.Load()), "long_polls")
	}
}

// startAPIProcess builds personaq and runs `personaq api` on natsURL; it
// returns the API's base URL and the process.
func startAPIProcess(b *testing.B, natsURL string) (string, *os.Process) {
	b.Helper()
	bin := filepath.Join(b.TempDir(), "personaq")
	out, err := exec.Command("go", "build", "-o", bin, "../personaq").CombinedOutput()
	require.NoError(b, err, "%s", out)
	cmd := exec.Command(bin, "--nats-url", natsURL, "--log-level", "warn", "api", "--listen", "127.0.0.1:0")
	cmd.Env = append(os.Environ(), "PERSONAQ_API_TOKEN="+allToken)
	stdout, err := cmd.StdoutPipe()
	require.NoError(b, err)
	cmd.Stderr = os.Stderr
	require.NoError(b, cmd.Start())
	b.Cleanup(func() { _ = cmd.Process.Signal(os.Interrupt); _ = cmd.Wait() })
	line, err := bufio.NewReader(stdout).ReadString('\n')
	require.NoError(b, err)
	_, url, ok := strings.Cut(strings.TrimSpace(line), "serving ")
	require.True(b, ok, line)
	go func() { _, _ = io.Copy(io.Discard, stdout) }()
	return strings.TrimSuffix(url, "/v1"), cmd.Process
}

// procStatus is a kB field of /proc/PID/status (VmHWM: the peak resident
// set size; VmRSS: the resident set size now), in kB.
func procStatus(b *testing.B, pid int, field string) int64 {
	v := testenv.ProcStatus(strconv.Itoa(pid), strings.TrimSuffix(field, ":"))
	if v == 0 {
		b.Fatal("no " + field)
	}
	return int64(v / 1024)
}

// procCPU is the user plus system CPU time the process used so far.
func procCPU(b *testing.B, pid int) time.Duration {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	require.NoError(b, err)
	f := strings.Fields(string(raw)[strings.LastIndexByte(string(raw), ')')+2:])
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(ut+st) * time.Second / 100 // USER_HZ
}
