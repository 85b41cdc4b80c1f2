package cli_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/personaq/personaq/cmd/cli"
	"github.com/personaq/personaq/consumers/wire"
	"github.com/personaq/personaq/integration/testenv"
	"github.com/personaq/personaq/schemas"
)

// run executes the CLI in process and returns exit code, stdout, stderr.
func run(t *testing.T, ctx context.Context, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := cli.Run(ctx, append([]string{"--log-format", "json"}, args...), &out, &errb)
	return code, out.String(), errb.String()
}

func TestPolicyExplainPinsSeedBudgets(t *testing.T) {
	t.Parallel()
	for persona, minutes := range map[string]float64{"context": 7.5, "planner": 5.5, "lead-engineer": 9.5} {
		t.Run(persona, func(t *testing.T) {
			t.Parallel()
			code, out, errOut := run(t, context.Background(), "policy", "explain", "--persona", persona, "-o", "json")
			require.Equal(t, 0, code, errOut)
			var got []struct {
				StepDeadlineMinutes float64 `json:"stepDeadlineMinutes"`
				TotalBackoffMs      int64   `json:"totalBackoffMs"`
			}
			require.NoError(t, json.Unmarshal([]byte(out), &got))
			require.Len(t, got, 1)
			require.InDelta(t, minutes, got[0].StepDeadlineMinutes, 1e-9)
			require.EqualValues(t, 180000, got[0].TotalBackoffMs)
		})
	}
}

func TestBadFlagsFailFastNamingTheFlag(t *testing.T) {
	t.Parallel()
	cases := map[string]struct {
		args []string
		want string
	}{
		"LogFormat":  {[]string{"--log-format", "xml", "policy", "explain"}, "--log-format"},
		"LogLevel":   {[]string{"--log-level", "loud", "policy", "explain"}, "--log-level"},
		"Preset":     {[]string{"policy", "explain", "--preset", "nope"}, "--preset"},
		"Input":      {[]string{"publish", "--persona", "echo", "--task", "t", "--input", "{not json"}, "--input"},
		"Persona":    {[]string{"publish", "--persona", "bad.persona", "--task", "t"}, "persona"},
		"TimeScale":  {[]string{"dev", "--time-scale", "0"}, "--time-scale"},
		"ConfigFile": {[]string{"config", "check", "/nonexistent/personaq.yaml"}, "personaq.yaml"},
		// Before the configuration file is read: this one does not exist.
		"ServeMemoryLimitRatio": {[]string{"serve", "--config", "/nonexistent/personaq.yaml", "--memory-limit-ratio", "1.5"}, "invalid flag --memory-limit-ratio: 1.5"},
		"APIMemoryLimitRatio":   {[]string{"api", "--memory-limit-ratio", "-0.1"}, "invalid flag --memory-limit-ratio: -0.1"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			var out, errb bytes.Buffer
			code := cli.Run(context.Background(), tc.args, &out, &errb)
			require.NotEqual(t, 0, code)
			require.Contains(t, errb.String(), tc.want)
		})
	}
}

func TestPublishNamesTheUnreachableURL(t *testing.T) {
	t.Parallel()
	code, _, errOut := run(t, context.Background(), "--nats-url", "nats://127.0.0.1:1", "publish", "--persona", "echo", "--task", "t1")
	require.Equal(t, 1, code)
	require.Contains(t, errOut, "nats://127.0.0.1:1")
}

func TestDevOnceSettlesTheDemoWorkload(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	code, out, errOut := run(t, ctx, "dev", "--once", "--per-persona", "1", "--data-dir", t.TempDir())
	require.Equal(t, 0, code, errOut)
	for _, want := range []string{
		"echo       succeeded", "flaky      succeeded", "validator  succeeded",
		"terminal   quarantined  terminal", "slowpoke   quarantined  exhausted", "plateau    deferred",
	} {
		require.Contains(t, collapse(out), collapse(want))
	}
	// Each persona's step budget, as serve logs it.
	require.Contains(t, errOut, "Calculated PersonaRequestStep timeout to accommodate retries")
	require.Contains(t, errOut, "Step timeout configured")
}

func collapse(s string) string { return strings.Join(strings.Fields(s), " ") }

func TestServeRunsConfiguredPersonasAndPublishReachesThem(t *testing.T) {
	t.Parallel()
	n := testenv.StartNATS(t)
	r := testenv.StartRedis(t)
	cfgPath := filepath.Join(t.TempDir(), "personaq.yaml")
	require.NoError(t, os.WriteFile(cfgPath, []byte(`
personas:
  flaky:
    invoker: {type: demo, demo: flaky}
    timeout: 5s
    policy:
      preset: persona
      schedule: {type: fixed, every: 100ms}
`), 0o600))
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan int, 1)
	var logs string
	go func() {
		code, _, errOut := run(t, ctx, "--nats-url", n.URL(), "--redis-url", r.URL(), "serve", "--config", cfgPath)
		logs = errOut
		served <- code
	}()
	js := n.JetStream(t)
	require.Eventually(t, func() bool {
		_, err := js.Consumer(context.Background(), "PERSONAQ_REQUESTS", wire.Durable("flaky"))
		return err == nil
	}, 20*time.Second, 20*time.Millisecond, "serve provisions the persona's consumer")

	code, out, errOut := run(t, context.Background(), "--nats-url", n.URL(), "publish", "--persona", "flaky", "--task", "t-serve", "--id", "req-1", "-o", "json")
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, `"duplicate":false`)
	code, out, _ = run(t, context.Background(), "--nats-url", n.URL(), "publish", "--persona", "flaky", "--task", "t-serve", "--id", "req-1", "-o", "json")
	require.Equal(t, 0, code)
	require.Contains(t, out, `"duplicate":true`, "same id is deduplicated")
	code, _, errOut = run(t, context.Background(), "--nats-url", n.URL(), "publish", "--persona", "flaky", "--task", "t-serve", "--id", "req-1", "--input", `{"other":1}`)
	require.Equal(t, 1, code, "the same id with other content is refused")
	require.Contains(t, errOut, "request id req-1 was already submitted for persona flaky task t-serve step main with other content (conflict")

	ev := waitOutcome(t, js, "req-1")
	require.Equal(t, schemas.OutcomeSucceeded, ev.Outcome)
	require.Equal(t, 3, ev.Attempts, "the demo flaky persona succeeds on attempt 3")
	cancel()
	require.Equal(t, 0, <-served, "SIGTERM-style cancel drains and exits 0")
	// The step budget per persona at start (4 × 5s + 3 × 100ms + 30s), and
	// the retry-with-feedback tag of the failed attempts.
	require.Contains(t, logs, `"message":"Calculated PersonaRequestStep timeout to accommodate retries"`)
	require.Contains(t, logs, `"step":"*","persona":"flaky","personaTimeoutMs":5000,"personaTimeoutMinutes":"0.08","maxRetries":3,`+
		`"totalBackoffMs":300,"totalBackoffMinutes":"0.01","calculatedTimeout":50300,"calculatedTimeoutMinutes":"0.84"`)
	require.Contains(t, logs, `"step":"*","persona":"flaky","timeoutMs":50300,"timeoutMinutes":"0.84",`)
	require.Contains(t, logs, `"message":"Step timeout configured"`)
	require.Contains(t, logs, `"message":"[RETRY 1] API error: demo: flaky failure on attempt 1 (succeeds on attempt 3)"`)
	require.Contains(t, logs, `"message":"[RETRY 2] API error: demo: flaky failure on attempt 2 (succeeds on attempt 3)"`)
}

func TestServeWithoutRedisSaysSo(t *testing.T) {
	t.Parallel()
	cfgPath := filepath.Join(t.TempDir(), "personaq.yaml")
	require.NoError(t, os.WriteFile(cfgPath, []byte("personas:\n  echo:\n    invoker: {type: demo, demo: echo}\n"), 0o600))
	var out, errb bytes.Buffer
	code := cli.Run(context.Background(), []string{"serve", "--config", cfgPath}, &out, &errb)
	require.Equal(t, 1, code)
	require.Contains(t, errb.String(), "needs a real Redis")
}

func waitOutcome(t *testing.T, js jetstream.JetStream, requestID string) *schemas.OutcomeEvent {
	t.Helper()
	var found *schemas.OutcomeEvent
	require.Eventually(t, func() bool {
		cons, err := js.OrderedConsumer(context.Background(), "PERSONAQ_OUTCOMES", jetstream.OrderedConsumerConfig{})
		if err != nil {
			return false
		}
		batch, err := cons.FetchNoWait(100)
		if err != nil {
			return false
		}
		for m := range batch.Messages() {
			if ev, err := schemas.DecodeOutcome(m.Data()); err == nil && ev.RequestID == requestID {
				found = ev
			}
		}
		return found != nil
	}, 30*time.Second, 100*time.Millisecond)
	return found
}

func TestTaskShowPrintsTheAttemptTimeline(t *testing.T) {
	t.Parallel()
	r := testenv.StartRedis(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	code, out, errOut := run(t, ctx, "--redis-url", r.URL(), "dev", "--once", "--per-persona", "1", "--data-dir", t.TempDir())
	require.Equal(t, 0, code, errOut)
	task := ""
	for _, f := range strings.Fields(out) {
		if strings.HasPrefix(f, "demo-plateau-") {
			task = f
		}
	}
	require.NotEmpty(t, task)

	code, out, errOut = run(t, ctx, "--redis-url", r.URL(), "task", "show", task, "-o", "json")
	require.Equal(t, 0, code, errOut)
	var got struct {
		Steps []struct {
			Step     string `json:"step"`
			State    string `json:"state"`
			Attempts []struct {
				Agent    string `json:"agent"`
				Class    string `json:"class"`
				Progress string `json:"progress"`
			} `json:"attempts"`
		} `json:"steps"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &got))
	require.Len(t, got.Steps, 1)
	require.Equal(t, "main", got.Steps[0].Step)
	require.GreaterOrEqual(t, len(got.Steps[0].Attempts), 3)
	require.Equal(t, "agent-a", got.Steps[0].Attempts[0].Agent)
	require.Equal(t, "agent-b", got.Steps[0].Attempts[1].Agent)
	require.Equal(t, "5/9", got.Steps[0].Attempts[0].Progress)

	code, out, _ = run(t, ctx, "--redis-url", r.URL(), "task", "show", task)
	require.Equal(t, 0, code)
	require.Contains(t, out, "NEXT IN")
	code, _, errOut = run(t, ctx, "--redis-url", r.URL(), "task", "show", "no-such-task")
	require.Equal(t, 1, code)
	require.Contains(t, errOut, "no ledger entries")
}

// serveDemo runs `personaq serve` with demo personas until the test ends
// and returns the NATS URL once their consumers exist.
func serveDemo(t *testing.T, personas ...string) (string, jetstream.JetStream) {
	t.Helper()
	yaml := "personas:\n"
	for _, p := range personas {
		yaml += "  " + p + ":\n    invoker: {type: demo, demo: " + p + "}\n    timeout: 2s\n    policy: {preset: persona, schedule: {type: fixed, every: 100ms}}\n"
	}
	return serveYAML(t, yaml, personas...)
}

// serveYAML runs `personaq serve` with the configuration yaml (a real
// redis-server for its ledger) until the test ends, once it has
// provisioned the personas' consumers.
func serveYAML(t *testing.T, yaml string, personas ...string) (string, jetstream.JetStream) {
	t.Helper()
	n := testenv.StartNATS(t)
	r := testenv.StartRedis(t)
	cfgPath := filepath.Join(t.TempDir(), "personaq.yaml")
	require.NoError(t, os.WriteFile(cfgPath, []byte(yaml), 0o600))
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan struct{})
	go func() {
		defer close(served)
		run(t, ctx, "--nats-url", n.URL(), "--redis-url", r.URL(), "serve", "--config", cfgPath)
	}()
	t.Cleanup(func() { cancel(); <-served })
	js := n.JetStream(t)
	for _, p := range personas {
		require.Eventually(t, func() bool {
			_, err := js.Consumer(context.Background(), "PERSONAQ_REQUESTS", wire.Durable(p))
			return err == nil
		}, 20*time.Second, 20*time.Millisecond, "serve provisions %s", p)
	}
	return n.URL(), js
}

func TestPublishWaitPrintsOutputAndExitsByOutcome(t *testing.T) {
	t.Parallel()
	url, _ := serveDemo(t, "echo", "terminal", "slowpoke")
	ctx := context.Background()

	code, out, errOut := run(t, ctx, "--nats-url", url, "publish", "--persona", "echo", "--task", "t-wait", "--id", "w-1", "--input", `{"goal":"x"}`, "--wait")
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, `"goal":"x"`, "the persona's output on stdout")
	require.Contains(t, errOut, "attempt 1/", "attempt events on stderr")
	require.Contains(t, errOut, "Calculated PersonaRequestStep timeout to accommodate retries")

	code, out, errOut = run(t, ctx, "--nats-url", url, "result", "w-1", "-o", "json")
	require.Equal(t, 0, code, errOut)
	var rec struct {
		Outcome string          `json:"outcome"`
		Output  json.RawMessage `json:"output"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &rec))
	require.Equal(t, "succeeded", rec.Outcome)
	require.Contains(t, collapse(string(rec.Output)), `"goal": "x"`)

	code, _, errOut = run(t, ctx, "--nats-url", url, "publish", "--persona", "terminal", "--task", "t-wait", "--id", "w-2", "--wait")
	require.Equal(t, 3, code, "blocked")
	require.Contains(t, errOut, "blocked: terminal")
	code, out, _ = run(t, ctx, "--nats-url", url, "result", "w-2")
	require.Equal(t, 3, code)
	require.Contains(t, out, "quarantine seq")

	code, _, errOut = run(t, ctx, "--nats-url", url, "publish", "--persona", "slowpoke", "--task", "t-wait", "--wait", "--timeout", "500ms")
	require.Equal(t, 6, code, errOut)
	require.Contains(t, errOut, "step deadline")

	code, _, errOut = run(t, ctx, "--nats-url", url, "publish", "--persona", "ekko", "--task", "t-wait")
	require.Equal(t, 1, code)
	require.Contains(t, errOut, "served: echo, slowpoke, terminal")
	code, _, errOut = run(t, ctx, "--nats-url", url, "publish", "--persona", "echo", "--task", "t-wait", "--policy", "nope")
	require.Equal(t, 1, code)
	require.Contains(t, errOut, "nope")
	code, _, errOut = run(t, ctx, "--nats-url", url, "result", "never-published")
	require.Equal(t, 1, code)
	require.Contains(t, errOut, "no terminal record")
}

func TestTaskShowFindsARunningDevLedger(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	listen := "127.0.0.1:" + freePort(t)
	// Made before dev starts: a TempDir registered later would be removed
	// (cleanups run last-in first-out) while dev still writes to it.
	dataDir := t.TempDir()
	done := make(chan struct{})
	go func() {
		defer close(done)
		run(t, ctx, "dev", "--listen", listen, "--per-persona", "0", "--data-dir", dataDir)
	}()
	t.Cleanup(func() { cancel(); <-done })
	url := "nats://" + listen
	require.Eventually(t, func() bool {
		code, out, _ := run(t, context.Background(), "--nats-url", url, "persona", "ls")
		return code == 0 && strings.Contains(out, "validator")
	}, 20*time.Second, 50*time.Millisecond)
	code, _, errOut := run(t, context.Background(), "--nats-url", url, "publish", "--persona", "validator", "--task", "t-dev", "--id", "d-1", "--wait")
	require.Equal(t, 0, code, errOut)
	code, out, errOut := run(t, context.Background(), "--nats-url", url, "task", "show", "t-dev")
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "result: succeeded after 2 attempt(s)")
	require.Contains(t, out, "validation")
}

func freePort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	return strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
}

// An --input over the message bound says so (for stdin and @file alike),
// rather than "not valid JSON".
func TestPublishInputTooLargeSaysSo(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "big.json")
	require.NoError(t, os.WriteFile(path, []byte(`"`+strings.Repeat("x", schemas.MaxPayloadBytes)+`"`), 0o600))
	code, _, errOut := run(t, context.Background(), "publish", "--persona", "echo", "--task", "t", "--input", "@"+path)
	require.Equal(t, 1, code)
	require.Contains(t, errOut, "invalid flag --input: over 524288 bytes")
}

// --version names the build and the NATS client it was built with.
func TestVersion(t *testing.T) {
	t.Parallel()
	code, out, errOut := run(t, context.Background(), "--version")
	require.Equal(t, 0, code, errOut)
	require.Regexp(t, `^personaq \S+.* \(go1\.[0-9.]+(, nats\.go v\S+)?\)\n$`, out) // a test binary lists no dependencies
}
