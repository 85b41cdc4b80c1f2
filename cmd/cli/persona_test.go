package cli_test

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"

	"github.com/personaq/personaq/consumers"
	"github.com/personaq/personaq/consumers/wire"
	"github.com/personaq/personaq/handlers"
	"github.com/personaq/personaq/integration/testenv"
	"github.com/personaq/personaq/retry"
	"github.com/personaq/personaq/schemas"
)

// handled records the task ids a persona handler ran.
type handled struct {
	mu    sync.Mutex
	tasks map[string]bool
}

func (h *handled) handler() handlers.Handler {
	return handlers.Func(func(_ context.Context, req *handlers.Request) (handlers.Result, error) {
		h.mu.Lock()
		defer h.mu.Unlock()
		h.tasks[req.Message.TaskID] = true
		return handlers.Result{}, nil
	})
}

func (h *handled) ran(task string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.tasks[task]
}

type personaLine struct {
	Persona          string     `json:"persona"`
	Consumer         string     `json:"consumer"`
	Pending          uint64     `json:"pending"`
	InFlight         int        `json:"inFlight"`
	Redelivered      int        `json:"redelivered"`
	Paused           bool       `json:"paused"`
	PauseUntil       *time.Time `json:"pauseUntil"`
	PauseRemainingMs int64      `json:"pauseRemainingMs"`
	WaitingPulls     int        `json:"waitingPulls"`
}

func personaLs(t *testing.T, url string) map[string]personaLine {
	t.Helper()
	code, out, errOut := run(t, context.Background(), "--nats-url", url, "persona", "ls", "-o", "json")
	require.Equal(t, 0, code, errOut)
	var lines []personaLine
	require.NoError(t, json.Unmarshal([]byte(out), &lines))
	byName := map[string]personaLine{}
	for _, l := range lines {
		byName[l.Persona] = l
	}
	return byName
}

// TestPersonaPauseAndResumeAcrossARunningReplica pauses a persona served
// by a running runtime: a request published meanwhile waits in the stream
// and runs once the persona is resumed; the other persona keeps working.
func TestPersonaPauseAndResumeAcrossARunningReplica(t *testing.T) {
	t.Parallel()
	n := testenv.StartNATS(t)
	js := n.JetStream(t)
	h := &handled{tasks: map[string]bool{}}
	pol := retry.Policy{Name: "test", MaxAttempts: 2, AttemptTimeout: 2 * time.Second, Schedule: retry.Linear{Step: 50 * time.Millisecond}}
	log := zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.WarnLevel)
	rt, err := consumers.New(consumers.Config{
		WithoutLedger: true, JetStream: js, Logger: &log, DrainTimeout: 2 * time.Second, FetchMaxWait: 200 * time.Millisecond,
		Personas: []consumers.Persona{
			{Name: "echo", Handler: h.handler(), Policy: pol, Concurrency: 2},
			{Name: "planner", Handler: h.handler(), Policy: pol, Concurrency: 2},
		},
	})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- rt.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	require.Eventually(t, func() bool { return rt.Ready() == nil }, 10*time.Second, 10*time.Millisecond)
	publishTask := func(persona, task string) {
		_, err := wire.PublishRequest(context.Background(), js, wire.Topology{}, schemas.NewRequest(task, "main", persona))
		require.NoError(t, err)
	}
	publishTask("echo", "before-pause")
	require.Eventually(t, func() bool { return h.ran("before-pause") }, 10*time.Second, 10*time.Millisecond)

	code, out, errOut := run(t, context.Background(), "--nats-url", n.URL(), "persona", "pause", "echo")
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "paused persona echo (consumer personaq-echo on PERSONAQ_REQUESTS) until resumed")
	ls := personaLs(t, n.URL())
	require.True(t, ls["echo"].Paused)
	require.NotNil(t, ls["echo"].PauseUntil)
	require.Greater(t, ls["echo"].PauseUntil.Year(), time.Now().Year()+50, "default pause: far future")
	require.False(t, ls["planner"].Paused)

	publishTask("echo", "while-paused")
	publishTask("planner", "other-persona")
	require.Eventually(t, func() bool { return h.ran("other-persona") }, 10*time.Second, 10*time.Millisecond,
		"only the paused persona stops")
	require.Never(t, func() bool { return h.ran("while-paused") }, 1500*time.Millisecond, 20*time.Millisecond,
		"a paused persona's request is not delivered")
	ls = personaLs(t, n.URL())
	require.EqualValues(t, 1, ls["echo"].Pending, "the request waits in the stream")
	require.Zero(t, ls["echo"].InFlight)

	code, out, errOut = run(t, context.Background(), "--nats-url", n.URL(), "persona", "ls")
	require.Equal(t, 0, code, errOut)
	require.Contains(t, collapse(out), "PERSONA PENDING IN FLIGHT REDELIVERED PAUSED PULLS")
	require.Contains(t, collapse(out), "echo 1 0 0 until resumed")

	code, out, errOut = run(t, context.Background(), "--nats-url", n.URL(), "persona", "resume", "echo")
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "resumed persona echo")
	require.Eventually(t, func() bool { return h.ran("while-paused") }, 10*time.Second, 10*time.Millisecond,
		"resume delivers what waited")
	require.False(t, personaLs(t, n.URL())["echo"].Paused)

	t.Run("Until", func(t *testing.T) {
		code, out, errOut := run(t, context.Background(), "--nats-url", n.URL(), "persona", "pause", "planner", "--until", "30m")
		require.Equal(t, 0, code, errOut)
		require.Contains(t, out, "paused persona planner")
		l := personaLs(t, n.URL())["planner"]
		require.True(t, l.Paused)
		require.WithinDuration(t, time.Now().Add(30*time.Minute), *l.PauseUntil, time.Minute)
		require.InDelta(t, (30 * time.Minute).Milliseconds(), l.PauseRemainingMs, float64(time.Minute.Milliseconds()))
		code, out, _ = run(t, context.Background(), "--nats-url", n.URL(), "persona", "ls")
		require.Equal(t, 0, code)
		require.Regexp(t, `planner .* until \d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ \((29m5\ds|30m0s) left\)`, out)

		at := time.Now().Add(2 * time.Hour).UTC().Format(time.RFC3339)
		code, _, errOut = run(t, context.Background(), "--nats-url", n.URL(), "persona", "pause", "planner", "--until", at)
		require.Equal(t, 0, code, errOut)
		require.Equal(t, at, personaLs(t, n.URL())["planner"].PauseUntil.Format(time.RFC3339))
		code, _, errOut = run(t, context.Background(), "--nats-url", n.URL(), "persona", "resume", "planner")
		require.Equal(t, 0, code, errOut)
	})

	t.Run("Errors", func(t *testing.T) {
		cases := map[string]struct {
			args []string
			want string
		}{
			"UnknownPersona": {[]string{"persona", "pause", "nope"}, `unknown persona "nope": no consumer personaq-nope on stream PERSONAQ_REQUESTS (known: echo, planner)`},
			"UnknownResume":  {[]string{"persona", "resume", "nope"}, `unknown persona "nope"`},
			"BadName":        {[]string{"persona", "pause", "bad.name"}, `unknown persona "bad.name"`},
			"BadUntil":       {[]string{"persona", "pause", "echo", "--until", "soon"}, "invalid flag --until"},
			"PastUntil":      {[]string{"persona", "pause", "echo", "--until", "2001-01-01T00:00:00Z"}, "not in the future"},
			"NegativeUntil":  {[]string{"persona", "pause", "echo", "--until", "-5m"}, "positive duration"},
			"NoStream":       {[]string{"persona", "ls", "--stream", "NOPE"}, "stream NOPE not found"},
			"Output":         {[]string{"persona", "ls", "-o", "yaml"}, "invalid flag --output"},
		}
		for name, tc := range cases {
			code, _, errOut := run(t, context.Background(), append([]string{"--nats-url", n.URL()}, tc.args...)...)
			require.Equal(t, 1, code, name)
			require.Contains(t, errOut, tc.want, name)
		}
		require.False(t, personaLs(t, n.URL())["echo"].Paused, "failed commands changed nothing")
	})
}

// TestPersonaPauseOnAnOlderServerSaysSo answers the JetStream API like a
// nats-server before 2.11: it has no CONSUMER.PAUSE endpoint, so the
// request gets a "bad request" error; or it answers without pausing.
func TestPersonaPauseOnAnOlderServerSaysSo(t *testing.T) {
	t.Parallel()
	for name, pauseAnswer := range map[string]string{
		"BadRequest": `{"type":"io.nats.jetstream.api.v1.consumer_pause_response","error":{"code":400,"err_code":10003,"description":"bad request"}}`,
		"NotPaused":  `{"type":"io.nats.jetstream.api.v1.consumer_pause_response","paused":false}`,
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			url := fakeJetStreamAPI(t, pauseAnswer)
			code, _, errOut := run(t, context.Background(), "--nats-url", url, "persona", "pause", "echo")
			require.Equal(t, 1, code)
			require.Contains(t, errOut, "consumer pause needs nats-server 2.11 or newer")
		})
	}
}

// fakeJetStreamAPI starts a nats-server without JetStream and answers the
// few JetStream API requests `persona pause echo` makes.
func fakeJetStreamAPI(t *testing.T, pauseAnswer string) string {
	t.Helper()
	s, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: server.RANDOM_PORT, NoLog: true, NoSigs: true})
	require.NoError(t, err)
	s.Start()
	require.True(t, s.ReadyForConnections(10*time.Second))
	t.Cleanup(s.Shutdown)
	nc, err := nats.Connect(s.ClientURL())
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	_, err = nc.Subscribe("$JS.API.>", func(m *nats.Msg) {
		switch {
		case m.Subject == "$JS.API.INFO":
			_ = m.Respond([]byte(`{"type":"io.nats.jetstream.api.v1.account_info_response","memory":0,"storage":0,"streams":1,"consumers":1,"limits":{}}`))
		case strings.HasPrefix(m.Subject, "$JS.API.CONSUMER.INFO."):
			_ = m.Respond([]byte(`{"type":"io.nats.jetstream.api.v1.consumer_info_response","stream_name":"PERSONAQ_REQUESTS","name":"personaq-echo","config":{"durable_name":"personaq-echo","ack_policy":"explicit"}}`))
		case strings.HasPrefix(m.Subject, "$JS.API.CONSUMER.PAUSE."):
			_ = m.Respond([]byte(pauseAnswer))
		}
	})
	require.NoError(t, err)
	require.NoError(t, nc.Flush())
	return s.ClientURL()
}
