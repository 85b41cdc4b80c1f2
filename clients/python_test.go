package clients_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/personaq/personaq/integration/testenv"
)

// pyToken is the API token the Python client tests use (every scope).
const pyToken = "python-client-test-token"

// TestPythonClient runs the Python client's unittest suite
// (clients/python/tests) against a live personaq: `personaq dev` with its
// demo personas, real NATS JetStream in process and a real redis-server,
// serving the HTTP API on its console listener.
func TestPythonClient(t *testing.T) {
	t.Parallel() // beside the TypeScript suite: both mostly wait on their processes
	python := pyInterpreter(t)
	root := pyRepoRoot(t)
	rs := testenv.StartRedis(t)
	bin := buildPersonaq(t)
	dev := pyStartDev(t, bin, "redis://"+rs.Addr+"/0")
	cert, key := pyWriteCert(t)

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	gates := startStreamReplica(ctx, t, bin, dev.natsURL, dev.apiURL, pyToken)
	cmd := exec.CommandContext(ctx, python, "-m", "unittest", "discover", "-s", "clients/python/tests", "-v")
	cmd.Dir = root
	cmd.Env = append(os.Environ(),
		"PERSONAQ_URL="+dev.apiURL, "PERSONAQ_API_TOKEN="+pyToken,
		"PERSONAQ_BIN="+bin, "PERSONAQ_NATS_URL="+dev.natsURL, "PERSONAQ_TLS_CERT="+cert, "PERSONAQ_TLS_KEY="+key,
		"PERSONAQ_STREAM_GATES="+gates, "PERSONAQ_REQUIRE_LIVE=1", "PYTHONDONTWRITEBYTECODE=1", "PYTHONUNBUFFERED=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("python client tests failed (%v):\n%s\nthe whole run:\n%s", err, pyFailures(out), out)
	}
	t.Logf("python client tests passed: %s", pySummary(out))
}

// pyInterpreter finds python3, or skips the test (fails it when CI is set).
func pyInterpreter(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("python3")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("no python3 on PATH (apt-get install python3); CI is set, so this is a failure, not a skip")
		}
		t.Skip("no python3 on PATH: the Python client tests need it (apt-get install python3)")
	}
	return p
}

func pyRepoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	return root
}

var (
	pyAPIAt  = regexp.MustCompile(`API at (https?://\S+)`)
	pyNATSAt = regexp.MustCompile(`NATS at (nats://\S+)`)
)

// pyDev is a running `personaq dev`: its API and NATS URLs.
type pyDev struct{ apiURL, natsURL string }

// pyStartDev starts `personaq dev` serving the demo personas and no
// workload, waits for its "API at" and "NATS at" lines and returns the
// URLs. The process is stopped (SIGTERM, then killed) when the test ends.
func pyStartDev(t *testing.T, bin, redisURL string) pyDev {
	t.Helper()
	cmd := exec.Command(bin, "dev", "--per-persona", "0", "--console", "127.0.0.1:0",
		"--data-dir", t.TempDir(), "--redis-url", redisURL)
	cmd.Env = append(os.Environ(), "PERSONAQ_API_TOKEN="+pyToken)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	logs := &pyLockedBuffer{}
	cmd.Stderr = logs
	if err := cmd.Start(); err != nil {
		t.Fatalf("start personaq dev: %v", err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() { pyStop(t, cmd, exited, logs) })

	found := make(chan pyDev, 1)
	go pyScan(stdout, logs, found)
	select {
	case dev := <-found:
		return dev
	case <-exited:
		t.Fatal("personaq dev exited before serving the API (its output follows)")
	case <-time.After(60 * time.Second):
		t.Fatal("personaq dev printed no \"API at\" and \"NATS at\" lines in 60s (its output follows)")
	}
	return pyDev{}
}

// pyWriteCert writes a self-signed certificate for 127.0.0.1 and its key
// (PEM) for the HTTPS tests, and returns their paths.
func pyWriteCert(t *testing.T) (certPath, keyPath string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "personaq python client test"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IPAddresses:           []net.IP{net.IPv4(127, 0, 0, 1)},
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	certPath, keyPath = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	if err := os.WriteFile(certPath, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyPath, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		t.Fatal(err)
	}
	return certPath, keyPath
}

// pyScan copies dev's stdout into logs and sends the URLs once both are seen.
func pyScan(stdout io.Reader, logs *pyLockedBuffer, found chan<- pyDev) {
	sc := bufio.NewScanner(stdout)
	var dev pyDev
	sent := false
	for sc.Scan() {
		line := sc.Text()
		fmt.Fprintln(logs, line)
		if m := pyAPIAt.FindStringSubmatch(line); m != nil && dev.apiURL == "" {
			dev.apiURL = m[1]
		}
		if m := pyNATSAt.FindStringSubmatch(line); m != nil && dev.natsURL == "" {
			dev.natsURL = m[1]
		}
		if dev.apiURL != "" && dev.natsURL != "" && !sent {
			found <- dev
			sent = true
		}
	}
}

func pyStop(t *testing.T, cmd *exec.Cmd, exited <-chan struct{}, logs *pyLockedBuffer) {
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-exited:
	case <-time.After(15 * time.Second):
		_ = cmd.Process.Kill()
		<-exited
		t.Errorf("personaq dev did not stop within 15s of SIGTERM; killed. Its output:\n%s", logs.String())
	}
	if t.Failed() {
		t.Logf("personaq dev output:\n%s", logs.String())
	}
}

// pySummary is unittest's closing lines ("Ran N tests in …", "OK (…)").
func pySummary(out []byte) string {
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) > 3 {
		lines = lines[len(lines)-3:]
	}
	return strings.Join(lines, " ")
}

// pyFailures is unittest's report of what failed (its "=====" blocks, each
// with the traceback), put first in a failure message: the listing of every
// test before it is long, and a CI log shown head and tail would cut the
// tracebacks out of the middle.
func pyFailures(out []byte) string {
	s := string(out)
	start := strings.Index(s, "\n======")
	if start < 0 {
		return "(unittest printed no failure report)"
	}
	s = s[start+1:]
	if end := strings.Index(s, "\nRan "); end >= 0 {
		s = s[:end]
	}
	return s
}

// pyLockedBuffer is a bytes.Buffer safe for the scanner and the test to share.
type pyLockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *pyLockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *pyLockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func TestPyFailuresPutsTheTracebacksFirst(t *testing.T) {
	for _, tc := range []struct{ name, out, want string }{
		{"a failure", "test_a ... ok\ntest_b ... ERROR\n\n======\nERROR: test_b\n------\nTraceback: boom\n\n------\nRan 2 tests in 1s\n\nFAILED (errors=1)\n",
			"======\nERROR: test_b\n------\nTraceback: boom\n\n------"},
		{"no report", "Segmentation fault\n", "(unittest printed no failure report)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := pyFailures([]byte(tc.out)); got != tc.want {
				t.Errorf("pyFailures = %q, want %q", got, tc.want)
			}
		})
	}
}
