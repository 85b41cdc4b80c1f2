package config_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/stretchr/testify/require"

	"github.com/personaq/personaq/cmd/config"
	"github.com/personaq/personaq/handlers"
	"github.com/personaq/personaq/retry"
	"github.com/personaq/personaq/schemas"
)

func request(persona string, attempt int) *handlers.Request {
	return &handlers.Request{
		Message: &schemas.PersonaRequest{
			SchemaVersion: schemas.Version, RequestID: "r1", TaskID: "t1", Step: "s1", Persona: persona,
			Input: json.RawMessage(`{"q":1}`), CreatedAt: time.Now(),
		},
		Attempt: attempt, Role: retry.RoleFor(attempt, false), Agent: "a1",
	}
}

// TestPersonas builds one persona of each invoker type from YAML and runs
// an attempt through each.
func TestPersonas(t *testing.T) {
	t.Parallel()
	type call struct{ header, body string }
	calls := make(chan call, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		calls <- call{r.Header.Get("X-Api-Key"), string(b)}
		_, _ = io.WriteString(w, `{"ok":true}`)
	}))
	t.Cleanup(srv.Close)

	script := filepath.Join(t.TempDir(), "agent.sh")
	require.NoError(t, os.WriteFile(script, []byte("#!/bin/sh\necho \"model=$AGENT_MODEL attempt=$PERSONAQ_ATTEMPT\" >&2\nexit 3\n"), 0o700))

	src := dedent(`
		personas:
			planner:
				invoker:
					type: http
					url: ` + srv.URL + `/planner
					headers: {X-Api-Key: k1}
				timeout: 45s
				policy: llm
				concurrency: 8
			tester-qa:
				invoker:
					type: command
					path: ` + script + `
					env: {AGENT_MODEL: small}
					exit_codes: {"3": network}
				timeout: 90s
				policy:
					preset: persona
					max_attempts: 5
					schedule: {type: exponential, initial: 2s, coefficient: 3, maximum: 1m, jitter: 0.1}
					non_retryable: [AssertionSyntaxError]
					network_delay: 10s
					validation_delay: 1s
				max_replicas: 2
				ack_wait: 3m
				max_deliver: 10
			flaky:
				invoker: {type: demo, demo: flaky}
	`)
	f, err := config.Parse([]byte(src), nil)
	require.NoError(t, err)
	personas, err := f.Personas(nil)
	require.NoError(t, err)
	require.Len(t, personas, 3)
	require.Equal(t, []string{"flaky", "planner", "tester-qa"}, []string{personas[0].Name, personas[1].Name, personas[2].Name})
	flaky, planner, qa := personas[0], personas[1], personas[2]
	if h, ok := planner.Handler.(*handlers.HTTPInvoker); ok {
		t.Cleanup(h.CloseIdleConnections)
	}

	t.Run("HTTP", func(t *testing.T) {
		t.Parallel()
		require.IsType(t, &handlers.HTTPInvoker{}, planner.Handler)
		want := retry.LLMPolicy()
		want.Persona, want.AttemptTimeout = "planner", 45*time.Second
		require.Empty(t, cmp.Diff(want, planner.Policy))
		require.Equal(t, 8, planner.Concurrency)
		require.Equal(t, 4, planner.MaxReplicas)

		res, err := planner.Handler.Handle(context.Background(), request("planner", 1))
		require.NoError(t, err)
		require.JSONEq(t, `{"ok":true}`, string(res.Output))
		got := <-calls
		require.Equal(t, "k1", got.header)
		require.Contains(t, got.body, `"attempt":1`)
	})
	t.Run("Command", func(t *testing.T) {
		t.Parallel()
		require.IsType(t, &handlers.CommandInvoker{}, qa.Handler)
		want := retry.Policy{
			Name: "persona", Persona: "tester-qa", MaxAttempts: 5, AttemptTimeout: 90 * time.Second,
			Schedule:     retry.Exponential{Initial: 2 * time.Second, Coefficient: 3, Maximum: time.Minute, Jitter: 0.1},
			NonRetryable: []string{"AssertionSyntaxError"}, NetworkDelay: 10 * time.Second,
			ValidationDelay: time.Second, ExtendedTimeoutFactor: retry.DefaultExtendedTimeoutFactor,
			ProgressInterval: retry.DefaultProgressInterval,
		}
		require.Empty(t, cmp.Diff(want, qa.Policy, cmp.Comparer(func(a, b func() float64) bool { return a == nil && b == nil })))
		require.Equal(t, 3*time.Minute, qa.AckWait)
		require.Equal(t, 10, qa.MaxDeliver)
		require.Equal(t, 2, qa.MaxReplicas)

		_, err := qa.Handler.Handle(context.Background(), request("tester-qa", 2))
		c := handlers.Classify(err)
		require.Equal(t, retry.ClassNetwork, c.Class, "exit 3 is configured as network: %v", err)
		require.ErrorContains(t, err, "model=small attempt=2")
	})
	t.Run("Demo", func(t *testing.T) {
		t.Parallel()
		want := retry.PersonaPolicy(retry.DefaultPersonaTimeout)
		want.Persona = "flaky"
		require.Empty(t, cmp.Diff(want, flaky.Policy))
		require.Equal(t, 16, flaky.Concurrency)
		_, err := flaky.Handler.Handle(context.Background(), request("flaky", 1))
		require.Equal(t, retry.ClassRetryable, handlers.Classify(err).Class)
		require.ErrorContains(t, err, "flaky failure on attempt 1")
	})
	t.Run("PoliciesAreValid", func(t *testing.T) {
		t.Parallel()
		for _, p := range personas {
			require.NoError(t, p.Policy.Validate(), p.Name)
		}
	})
}

func TestPersonasSchedules(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		schedule string
		want     retry.Schedule
	}{
		{"LinearDefaultStep", "{type: linear}", retry.Linear{Step: 30 * time.Second}},
		{"Linear", "{type: linear, step: 5s}", retry.Linear{Step: 5 * time.Second}},
		{"ExponentialDefaults", "{type: exponential}", retry.Exponential{Initial: time.Second}},
		{"Fixed", "{type: fixed, every: 7s}", retry.Fixed{Every: 7 * time.Second}},
		{"List", "{type: list, delays: [1s, 2s, 1m]}", retry.List{Delays: []time.Duration{time.Second, 2 * time.Second, time.Minute}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := mustParse(t, "personas:\n  p:\n    invoker: {type: demo, demo: echo}\n    policy: {schedule: "+tt.schedule+"}\n", nil)
			personas, err := f.Personas(nil)
			require.NoError(t, err)
			require.Empty(t, cmp.Diff(tt.want, personas[0].Policy.Schedule, cmp.Comparer(func(a, b func() float64) bool { return a == nil && b == nil })))
		})
	}
}

// TestExampleFile loads deployments/personaq.yaml as shipped, builds its
// personas, and checks it documents every environment variable.
func TestExampleFile(t *testing.T) {
	t.Parallel()
	const path = "../../deployments/personaq.yaml"
	f, err := config.Load(path, nil)
	require.NoError(t, err)
	personas, err := f.Personas(nil)
	require.NoError(t, err)
	types := map[string]string{}
	for name, p := range f.PersonaConfigs {
		types[name] = p.Invoker.Type
	}
	require.Equal(t, map[string]string{"planner": "http", "tester-qa": "command", "flaky": "demo"}, types)
	require.Len(t, personas, 3)
	require.Equal(t, "http://127.0.0.1:8081/planner", f.PersonaConfigs["planner"].Invoker.URL)
	require.Equal(t, "llm", f.PersonaConfigs["planner"].Policy.Preset)
	require.True(t, f.Redis.Enabled())
	_, err = f.NATSOptions()
	require.NoError(t, err)
	_, err = f.RedisOptions()
	require.NoError(t, err)

	var out bytes.Buffer
	require.NoError(t, f.WriteRedacted(&out))
	again, err := config.Parse(out.Bytes(), nil)
	require.NoError(t, err, "config check's output loads:\n%s", out.String())
	require.Empty(t, cmp.Diff(f.Redacted(), again, cmpopts.IgnoreUnexported(config.PersonaConfig{}, config.PolicyConfig{})), "and means the same")

	raw, err := os.ReadFile(path)
	require.NoError(t, err)
	doc, err := os.ReadFile("doc.go")
	require.NoError(t, err)
	for _, name := range config.EnvNames() {
		require.Contains(t, string(doc), name, "doc.go must list %s", name)
		if !strings.Contains(name, "<NAME>") {
			require.Contains(t, string(raw), name, "the example must document %s", name)
		}
	}
	// Per-persona variables are shown for the example's personas.
	for _, name := range []string{"PERSONAQ_PERSONAS_PLANNER_TIMEOUT", "PERSONAQ_PERSONAS_TESTER_QA_INVOKER_PATH", "PERSONAQ_PERSONAS_PLANNER_INVOKER_URL"} {
		require.Contains(t, string(raw), name)
	}
}

func TestPersonasRevalidates(t *testing.T) {
	t.Parallel()
	f := mustParse(t, echoOnly, nil)
	f.PersonaConfigs["echo"].Timeout = 0
	f.PersonaConfigs["echo"].Invoker.Demo = "nope"
	_, err := f.Personas(nil)
	require.Equal(t, []string{
		`invalid config: personas.echo.invoker.demo: unknown demo persona "nope" (known: echo, flaky, plateau, slowpoke, terminal, validator)`,
		"invalid config: personas.echo.timeout: must be positive, got 0s",
	}, problems(t, err))
}

func TestPolicyForms(t *testing.T) {
	t.Parallel()
	tests := []struct{ name, policy, wantPreset string }{
		{"Empty", "policy:", "persona"},
		{"Null", "policy: ~", "persona"},
		{"Name", "policy: git", "git"},
		{"MappingWithPreset", "policy: {preset: write}", "write"},
		{"MappingWithoutPreset", "policy: {max_attempts: 2}", "persona"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := mustParse(t, "personas:\n  p:\n    invoker: {type: demo, demo: echo}\n    "+tt.policy+"\n", nil)
			require.Equal(t, tt.wantPreset, f.PersonaConfigs["p"].Policy.Preset)
			personas, err := f.Personas(nil)
			require.NoError(t, err)
			require.Equal(t, tt.wantPreset, personas[0].Policy.Name)
		})
	}
	t.Run("NotAMapping", func(t *testing.T) {
		t.Parallel()
		_, err := parse(t, "personas:\n  p:\n    invoker: {type: demo, demo: echo}\n    policy: [llm]\n", nil)
		require.Equal(t, []string{"invalid config: personas.p.policy: line 4: want a preset name or a mapping"}, problems(t, err))
	})
}
