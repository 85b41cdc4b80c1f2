//go:build unix

package handlers_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/personaq/personaq/cmd/config"
	"github.com/personaq/personaq/handlers"
	"github.com/personaq/personaq/retry"
	"github.com/personaq/personaq/schemas"
)

// personaDoc is the persona contract page; its examples are run here so
// the page cannot drift from what the invokers do.
const personaDoc = "../docs/personas.md"

var docBlockRe = regexp.MustCompile("(?s)<!-- doc-test: ([a-z-]+) -->\n```[a-z]*\n(.*?)```")

// docBlocks returns the page's tested code blocks by name.
func docBlocks(t *testing.T) (string, map[string]string) {
	t.Helper()
	raw, err := os.ReadFile(personaDoc)
	require.NoError(t, err)
	blocks := map[string]string{}
	for _, m := range docBlockRe.FindAllStringSubmatch(string(raw), -1) {
		blocks[m[1]] = m[2]
	}
	for _, name := range []string{"envelope", "http-persona", "command-persona", "command-config"} {
		require.Contains(t, blocks, name, "docs/personas.md lost its %q example", name)
	}
	return string(raw), blocks
}

func TestPersonaContractDoc(t *testing.T) {
	t.Parallel()
	page, blocks := docBlocks(t)
	t.Run("EnvelopeExampleHasEveryField", func(t *testing.T) {
		t.Parallel()
		var env handlers.Envelope
		dec := json.NewDecoder(strings.NewReader(blocks["envelope"]))
		dec.DisallowUnknownFields()
		require.NoError(t, dec.Decode(&env), "the example must be a real envelope")
		raw, err := json.Marshal(env.Request)
		require.NoError(t, err)
		_, err = schemas.DecodeRequest(raw)
		require.NoError(t, err, "the example's request must be valid")
		// Every key a real envelope carries appears in the example.
		real := docRequest(2, []string{"validation: x"})
		real.Previous = []retry.Attempt{{Number: 1, Class: retry.ClassValidation, Error: "x", Progress: retry.Progress{Completed: 1, Total: 2}}}
		got, err := json.Marshal(handlers.NewEnvelope(real))
		require.NoError(t, err)
		for _, key := range jsonKeys(t, got) {
			require.Contains(t, blocks["envelope"], `"`+key+`"`, "the envelope example misses %q", key)
		}
	})
	t.Run("CommandPersonaRunsAsDocumented", func(t *testing.T) {
		t.Parallel()
		testDocCommandPersona(t, blocks["command-persona"])
	})
	t.Run("HTTPPersonaRunsAsDocumented", func(t *testing.T) {
		t.Parallel()
		testDocHTTPPersona(t, blocks["http-persona"])
	})
	t.Run("CommandConfigParses", func(t *testing.T) {
		t.Parallel()
		f, err := config.Parse([]byte(blocks["command-config"]), nil)
		require.NoError(t, err)
		p := f.PersonaConfigs["tester-qa"]
		require.NotNil(t, p)
		require.Equal(t, "command", p.Invoker.Type)
		require.Equal(t, 5*time.Second, p.Invoker.KillGrace.Std())
	})
	t.Run("EveryVariableIsDocumented", func(t *testing.T) {
		t.Parallel()
		for _, name := range commandEnvNames(t) {
			require.Contains(t, page, "`"+name+"`", "docs/personas.md does not document %s", name)
		}
	})
	t.Run("EveryHeaderIsDocumented", func(t *testing.T) {
		t.Parallel()
		lower := strings.ToLower(page)
		for _, name := range httpHeaderNames(t) {
			require.Contains(t, lower, "`"+strings.ToLower(name)+"`", "docs/personas.md does not document the %s header", name)
		}
	})
}

func docRequest(attempt int, feedback []string) *handlers.Request {
	msg := schemas.NewRequest("story-42", "plan", "tester-qa")
	msg.Input = json.RawMessage(`{"goal":"add retries"}`)
	msg.Agents = schemas.Agents{Primary: "claude", Fallback: "codex"}
	msg.ProgressTotal = 2
	lease := time.Now().Add(time.Minute)
	return &handlers.Request{Message: msg, Attempt: attempt, Role: retry.RoleFor(attempt, true), Agent: "claude",
		Feedback: feedback, ProgressInterval: 30 * time.Second, LeaseDeadline: func() time.Time { return lease }}
}

func jsonKeys(t *testing.T, doc []byte) []string {
	t.Helper()
	var keys []string
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			for k, c := range v {
				keys = append(keys, k)
				walk(c)
			}
		case []any:
			for _, c := range v {
				walk(c)
			}
		}
	}
	var v any
	require.NoError(t, json.Unmarshal(doc, &v))
	walk(v)
	slices.Sort(keys)
	return slices.Compact(keys)
}

func writeScript(t *testing.T, name, body string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	require.NoError(t, os.WriteFile(path, []byte(body), 0o755))
	return path
}

func testDocCommandPersona(t *testing.T, script string) {
	inv, err := handlers.NewCommand(handlers.CommandConfig{Path: writeScript(t, "agent.sh", script)})
	require.NoError(t, err)
	ctx := context.Background()
	res, err := inv.Handle(ctx, docRequest(1, nil))
	c := handlers.Classify(err)
	require.Equal(t, retry.ClassRetryable, c.Class, "exit 75 is retryable: %v", err)
	require.ErrorContains(t, err, "model overloaded")
	require.Equal(t, retry.Progress{Completed: 1, Total: 2}, res.Progress)

	res, err = inv.Handle(ctx, docRequest(2, []string{"validation: the plan has no test step"}))
	require.NoError(t, err)
	require.JSONEq(t, `{"agent":"claude","attempt":2,"seen_feedback":1}`, string(res.Output))
	require.Equal(t, retry.Progress{Completed: 2, Total: 2}, res.Progress)
	require.Equal(t, retry.Usage{InputTokens: 1200, OutputTokens: 300}, res.Usage)
}

func testDocHTTPPersona(t *testing.T, program string) {
	py, err := exec.LookPath("python3")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("python3 not on PATH; CI is set, so this is a failure, not a skip")
		}
		t.Skip("python3 not on PATH")
	}
	addr := freeAddr(t)
	_, port, _ := net.SplitHostPort(addr)
	program = strings.Replace(program, "8081", port, 1)
	cmd := exec.Command(py, writeScript(t, "persona.py", program))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr // its access log, shown when the test fails
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("persona.py stderr:\n%s", stderr.String())
		}
	})
	waitListening(t, addr)

	inv, err := handlers.NewHTTP(handlers.HTTPConfig{URL: "http://" + addr + "/"})
	require.NoError(t, err)
	ctx := context.Background()
	_, err = inv.Handle(ctx, docRequest(1, nil))
	c := handlers.Classify(err)
	require.Equal(t, retry.ClassRetryable, c.Class, "503 is retryable: %v", err)
	require.Equal(t, time.Second, c.RetryAfter, "Retry-After: 1 paces the retry")

	res, err := inv.Handle(ctx, docRequest(2, nil))
	require.NoError(t, err)
	require.Contains(t, string(res.Output), `"steps": ["write", "test"]`)
	require.Equal(t, retry.Progress{Completed: 2, Total: 2}, res.Progress)
	require.Equal(t, retry.Usage{InputTokens: 900, OutputTokens: 120}, res.Usage)
}

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	return addr
}

func waitListening(t *testing.T, addr string) {
	t.Helper()
	require.Eventually(t, func() bool {
		c, err := net.DialTimeout("tcp", addr, 100*time.Millisecond)
		if err == nil {
			_ = c.Close()
		}
		return err == nil
	}, 20*time.Second, 50*time.Millisecond, "the example persona never listened on %s", addr)
}

// commandEnvNames are the PERSONAQ_ variables a command persona is given.
func commandEnvNames(t *testing.T) []string {
	t.Helper()
	inv, err := handlers.NewCommand(handlers.CommandConfig{Path: "/usr/bin/env", Env: []string{"PERSONAQ_SELF_TEST=1"}})
	require.NoError(t, err)
	res, err := inv.Handle(context.Background(), docRequest(1, nil))
	require.NoError(t, err)
	var out string
	require.NoError(t, json.Unmarshal(res.Output, &out))
	var names []string
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		name, _, _ := strings.Cut(sc.Text(), "=")
		if strings.HasPrefix(name, "PERSONAQ_") && name != "PERSONAQ_SELF_TEST" && os.Getenv(name) == "" {
			names = append(names, name)
		}
	}
	require.NotEmpty(t, names)
	return names
}

// httpHeaderNames are the headers of personaq's own an HTTP persona gets.
func httpHeaderNames(t *testing.T) []string {
	t.Helper()
	got := make(chan http.Header, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got <- r.Header.Clone()
		fmt.Fprint(w, `{}`)
	}))
	t.Cleanup(srv.Close)
	inv, err := handlers.NewHTTP(handlers.HTTPConfig{URL: srv.URL})
	require.NoError(t, err)
	_, err = inv.Handle(context.Background(), docRequest(1, nil))
	require.NoError(t, err)
	var names []string
	for name := range <-got {
		switch name {
		case "Content-Length", "User-Agent", "Accept-Encoding":
			continue // Go's own
		}
		names = append(names, name)
	}
	slices.Sort(names)
	require.True(t, slices.ContainsFunc(names, func(n string) bool { return bytes.HasPrefix([]byte(n), []byte("X-Personaq-")) }))
	return names
}
