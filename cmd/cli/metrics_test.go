package cli_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/personaq/personaq/integration/testenv"
)

func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())
	return addr
}

func httpGet(url string) (int, string, error) {
	resp, err := http.Get(url)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body), err
}

func TestServeMetricsAddrServesMetricsAndProbes(t *testing.T) {
	t.Parallel()
	n := testenv.StartNATS(t)
	r := testenv.StartRedis(t)
	cfgPath := filepath.Join(t.TempDir(), "personaq.yaml")
	require.NoError(t, os.WriteFile(cfgPath, []byte("personas:\n  echo:\n    invoker: {type: demo, demo: echo}\n    timeout: 5s\n"), 0o600))
	addr := freeAddr(t)
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan int, 1)
	go func() {
		code, _, _ := run(t, ctx, "--nats-url", n.URL(), "--redis-url", r.URL(), "serve", "--config", cfgPath, "--metrics-addr", addr)
		served <- code
	}()
	base := "http://" + addr
	require.Eventually(t, func() bool {
		code, body, err := httpGet(base + "/readyz")
		return err == nil && code == http.StatusOK && body == "ready\n"
	}, 20*time.Second, 20*time.Millisecond, "/readyz turns 200 once the consumers are bound")
	code, _, err := httpGet(base + "/healthz")
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, code)

	code, _, errOut := run(t, context.Background(), "--nats-url", n.URL(), "publish", "--persona", "echo", "--task", "t-metrics")
	require.Equal(t, 0, code, errOut)
	require.Eventually(t, func() bool {
		_, body, err := httpGet(base + "/metrics")
		return err == nil && strings.Contains(body, `personaq_outcomes_total{outcome="succeeded",persona="echo",reason=""} 1`) &&
			strings.Contains(body, `personaq_attempts_total{class="succeeded",persona="echo"} 1`)
	}, 20*time.Second, 50*time.Millisecond)

	cancel()
	require.Equal(t, 0, <-served)
	_, _, err = httpGet(base + "/healthz")
	require.Error(t, err, "the listener closes with the replica")
}

func TestMetricsAddrThatCannotListenFailsFast(t *testing.T) {
	t.Parallel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	code, _, errOut := run(t, ctx, "dev", "--once", "--data-dir", t.TempDir(), "--metrics-addr", l.Addr().String())
	require.Equal(t, 1, code)
	require.Contains(t, errOut, "metrics server: listen "+l.Addr().String())
}
