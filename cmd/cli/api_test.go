package cli_test

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/personaq/personaq/cmd/cli"
)

// lockedBuffer is a bytes.Buffer a running command writes to while the
// test reads it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// start runs the CLI until the test ends; its stdout is readable meanwhile.
func start(t *testing.T, args ...string) *lockedBuffer {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var out, errb lockedBuffer
	done := make(chan struct{})
	go func() {
		defer close(done)
		cli.Run(ctx, append([]string{"--log-format", "json"}, args...), &out, &errb)
	}()
	t.Cleanup(func() { cancel(); <-done })
	return &out
}

func awaitLine(t *testing.T, out *lockedBuffer, re *regexp.Regexp) []string {
	t.Helper()
	var m []string
	require.Eventually(t, func() bool { m = re.FindStringSubmatch(out.String()); return m != nil }, 30*time.Second, 20*time.Millisecond,
		"output: %s", out)
	return m
}

func httpDo(t *testing.T, method, url, token, body string) (int, map[string]any) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, url, rd)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	var m map[string]any
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&m))
	return resp.StatusCode, m
}

// TestDevServesTheAPI: personaq dev serves the HTTP API on its console's
// listener and prints where, with the token it made.
func TestDevServesTheAPI(t *testing.T) {
	t.Parallel()
	out := start(t, "dev", "--per-persona", "0", "--data-dir", t.TempDir(), "--console", "127.0.0.1:"+freePort(t))
	m := awaitLine(t, out, regexp.MustCompile(`personaq dev: API at (http://\S+/v1) \(token: (\S+)\)\n`))
	base, token := m[1], m[2]
	code, st := httpDo(t, "POST", base+"/requests", token, `{"persona":"echo","task_id":"t-dev-api","input":{"hi":1}}`)
	require.Equal(t, http.StatusCreated, code, "%v", st)
	code, st = httpDo(t, "GET", base+"/requests/"+st["request_id"].(string)+"?wait=30s", token, "")
	require.Equal(t, http.StatusOK, code)
	require.Equal(t, "succeeded", st["status"])
	code, _ = httpDo(t, "GET", base+"/personas", "wrong-token", "")
	require.Equal(t, http.StatusUnauthorized, code)
	code, _ = httpDo(t, "GET", strings.TrimSuffix(base, "/v1")+"/healthz", "", "")
	require.Equal(t, http.StatusOK, code)
}

// TestAPICommandServesWithConfigTokens: personaq api serves with the config
// file's named tokens and their scopes.
func TestAPICommandServesWithConfigTokens(t *testing.T) {
	t.Parallel()
	url, _ := serveDemo(t, "echo")
	cfgPath := filepath.Join(t.TempDir(), "personaq.yaml")
	require.NoError(t, os.WriteFile(cfgPath, []byte(`
personas:
  echo:
    invoker: {type: demo, demo: echo}
api:
  tokens:
    - {name: orchestrator, token: orchestrator-secret-01, scopes: [submit, read]}
    - {name: watcher, token: watcher-secret-000001, scopes: [read]}
`), 0o600))
	out := start(t, "--nats-url", url, "api", "--config", cfgPath, "--listen", "127.0.0.1:"+freePort(t))
	base := awaitLine(t, out, regexp.MustCompile(`personaq api: serving (http://\S+/v1)`))[1]
	code, st := httpDo(t, "POST", base+"/requests", "orchestrator-secret-01", `{"persona":"echo","task_id":"t-api-cmd"}`)
	require.Equal(t, http.StatusCreated, code, "%v", st)
	code, st = httpDo(t, "POST", base+"/requests", "watcher-secret-000001", `{"persona":"echo","task_id":"t-api-cmd"}`)
	require.Equal(t, http.StatusForbidden, code)
	require.Equal(t, "submit", st["scope"])
	code, _ = httpDo(t, "GET", base+"/personas", "watcher-secret-000001", "")
	require.Equal(t, http.StatusOK, code)
}

// selfSigned writes a certificate and key for 127.0.0.1 and returns their
// paths and a pool trusting it.
func selfSigned(t *testing.T) (string, string, *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "personaq-api-test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	kder, err := x509.MarshalECPrivateKey(key)
	require.NoError(t, err)
	dir := t.TempDir()
	certPath, keyPath := filepath.Join(dir, "api.crt"), filepath.Join(dir, "api.key")
	require.NoError(t, os.WriteFile(certPath, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600))
	require.NoError(t, os.WriteFile(keyPath, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), 0o600))
	cert, err := x509.ParseCertificate(der)
	require.NoError(t, err)
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return certPath, keyPath, pool
}

// TestAPICommandServesTLS: --tls-cert and --tls-key serve HTTPS.
func TestAPICommandServesTLS(t *testing.T) {
	t.Parallel()
	url, _ := serveDemo(t, "echo")
	certPath, keyPath, pool := selfSigned(t)
	cfgPath := filepath.Join(t.TempDir(), "personaq.yaml")
	require.NoError(t, os.WriteFile(cfgPath, []byte(`
personas:
  echo:
    invoker: {type: demo, demo: echo}
api:
  tokens:
    - {name: reader, token: tls-reader-secret-01, scopes: [read]}
`), 0o600))
	out := start(t, "--nats-url", url, "api", "--config", cfgPath, "--listen", "127.0.0.1:"+freePort(t), "--tls-cert", certPath, "--tls-key", keyPath)
	base := awaitLine(t, out, regexp.MustCompile(`personaq api: serving (https://\S+/v1)`))[1]
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	req, _ := http.NewRequest("GET", base+"/personas", nil)
	req.Header.Set("Authorization", "Bearer tls-reader-secret-01")
	resp, err := hc.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.NotNil(t, resp.TLS, "served over TLS")
}

// TestDevUsesTheEnvToken: with PERSONAQ_API_TOKEN set, dev serves with it
// and does not print it. (Not parallel: it sets the environment.)
func TestDevUsesTheEnvToken(t *testing.T) {
	const token = "dev-env-token-for-the-test"
	t.Setenv("PERSONAQ_API_TOKEN", token)
	out := start(t, "dev", "--per-persona", "0", "--data-dir", t.TempDir(), "--console", "127.0.0.1:"+freePort(t))
	base := awaitLine(t, out, regexp.MustCompile(`personaq dev: API at (http://\S+/v1) \(token from PERSONAQ_API_TOKEN\)\n`))[1]
	code, _ := httpDo(t, "GET", base+"/personas", token, "")
	require.Equal(t, http.StatusOK, code)
	require.NotContains(t, out.String(), token)
}
