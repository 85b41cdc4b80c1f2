package console_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"

	"github.com/personaq/personaq/cmd/console"
	"github.com/personaq/personaq/consumers"
	"github.com/personaq/personaq/consumers/client"
	"github.com/personaq/personaq/consumers/ledger"
	"github.com/personaq/personaq/consumers/wire"
	"github.com/personaq/personaq/handlers"
	"github.com/personaq/personaq/integration/testenv"
	"github.com/personaq/personaq/retry"
	"github.com/personaq/personaq/schemas"
)

// testToken is the console token of every test console.
const testToken = "test-token-0123456789"

// env is a dev-like deployment: an in-process nats-server, a real
// redis-server for the ledger, a runtime serving the demo personas (and
// "fixable", which fails for good until the test fixes it), and a console.
type env struct {
	t      *testing.T
	js     jetstream.JetStream
	client *client.Client
	url    string
	led    console.Ledger
	broken atomic.Bool
	// typing is closed once the "typist" persona has written the first
	// half of its live output; typed lets it write the second half.
	typing, typed chan struct{}
}

func newEnv(t *testing.T) *env {
	t.Helper()
	n := testenv.StartNATS(t)
	r := testenv.StartRedis(t)
	led, err := ledger.New(ledger.Config{Client: r.Client(t)})
	require.NoError(t, err)
	e := &env{t: t, js: n.JetStream(t), typing: make(chan struct{}), typed: make(chan struct{})}
	e.broken.Store(true)
	e.startRuntime(led)
	e.client, err = client.New(client.Config{JetStream: e.js})
	require.NoError(t, err)
	e.led = led
	e.url = e.startConsole(false)
	return e
}

// fast shrinks a policy's waits so a test takes milliseconds per retry.
func fast(p retry.Policy) retry.Policy {
	p = p.WithDefaults()
	p.AttemptTimeout, p.Schedule, p.NetworkDelay = 500*time.Millisecond, retry.Linear{Step: 40 * time.Millisecond}, 40*time.Millisecond
	return p
}

func (e *env) personas() []consumers.Persona {
	var out []consumers.Persona
	for name, h := range handlers.DemoPersonas() {
		p := fast(retry.PersonaPolicy(time.Second))
		if name == "plateau" {
			p = fast(retry.AdaptivePolicy())
		}
		out = append(out, consumers.Persona{Name: name, Handler: h, Policy: p, Concurrency: 8})
	}
	fixable := handlers.Func(func(_ context.Context, req *handlers.Request) (handlers.Result, error) {
		if e.broken.Load() {
			return handlers.Result{}, handlers.Terminal(errors.New("fixable: the prompt template is broken"))
		}
		return handlers.Result{Output: []byte(fmt.Sprintf(`{"answer":"fixed","attempt":%d}`, req.Attempt))}, nil
	})
	// hang runs until its attempt is stopped (a cancel): one long attempt.
	hang := handlers.Func(func(ctx context.Context, _ *handlers.Request) (handlers.Result, error) {
		<-ctx.Done()
		return handlers.Result{}, context.Cause(ctx)
	})
	// typist writes live output, half of it once the test says so.
	typist := handlers.Func(func(ctx context.Context, _ *handlers.Request) (handlers.Result, error) {
		w := handlers.OutputWriter(ctx)
		fmt.Fprint(w, "Reading the code. ")
		closeOnce(e.typing)
		select {
		case <-e.typed:
		case <-ctx.Done():
			return handlers.Result{}, context.Cause(ctx)
		}
		fmt.Fprint(w, "The change is sound.")
		return handlers.Result{Output: []byte(`{"review":"sound"}`)}, nil
	})
	out = append(out, consumers.Persona{Name: "typist", Handler: typist, Policy: retry.Policy{Name: "typist", MaxAttempts: 1, AttemptTimeout: time.Minute}, Concurrency: 2})
	return append(out, consumers.Persona{Name: "fixable", Handler: fixable, Policy: fast(retry.PersonaPolicy(time.Second)), Concurrency: 4},
		consumers.Persona{Name: "hang", Handler: hang, Policy: retry.Policy{Name: "hang", MaxAttempts: 1, AttemptTimeout: time.Minute}, Concurrency: 2})
}

func (e *env) startRuntime(led consumers.Ledger) {
	log := zerolog.New(zerolog.NewTestWriter(e.t)).Level(zerolog.WarnLevel)
	rt, err := consumers.New(consumers.Config{
		JetStream: e.js, Personas: e.personas(), Ledger: led, Logger: &log,
		DrainTimeout: 2 * time.Second, FetchMaxWait: 100 * time.Millisecond,
	})
	require.NoError(e.t, err)
	require.NoError(e.t, rt.Provision(context.Background()))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- rt.Run(ctx) }()
	e.t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			e.t.Error("the runtime did not stop within 30s")
		}
	})
}

// startConsole serves a console on the deployment and returns its URL.
func (e *env) startConsole(readOnly bool) string {
	log := zerolog.New(zerolog.NewTestWriter(e.t)).Level(zerolog.WarnLevel)
	srv, err := console.New(console.Config{JetStream: e.js, Ledger: e.led, Token: testToken, ReadOnly: readOnly, Logger: &log})
	require.NoError(e.t, err)
	ctx, cancel := context.WithCancel(context.Background())
	srv.Start(ctx)
	ts := httptest.NewUnstartedServer(srv.Handler())
	ts.Config.BaseContext = func(net.Listener) context.Context { return ctx }
	ts.Start()
	e.t.Cleanup(func() { cancel(); ts.CloseClientConnections(); ts.Close(); srv.Stop() })
	return ts.URL
}

// publish sends a request for persona in task and returns its id.
func (e *env) publish(persona, task string) string {
	e.t.Helper()
	req := schemas.NewRequest(task, "main", persona)
	req.Agents = schemas.Agents{Primary: "agent-a"}
	if persona == "plateau" {
		req.Agents.Fallback, req.ProgressTotal = "agent-b", 9
	}
	_, err := wire.PublishRequest(context.Background(), e.js, wire.Topology{}, req)
	require.NoError(e.t, err)
	return req.RequestID
}

// settle waits for the terminal record of every request.
func (e *env) settle(ids ...string) {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, id := range ids {
		_, err := e.client.Await(ctx, id)
		var stopped *client.StoppedError
		if err != nil && !errors.As(err, &stopped) {
			e.t.Fatalf("await %s: %v", id, err)
		}
	}
}

// paused reports whether persona's consumer is paused on the server.
func (e *env) paused(persona string) bool {
	e.t.Helper()
	c, err := e.js.Consumer(context.Background(), "PERSONAQ_REQUESTS", wire.Durable(persona))
	require.NoError(e.t, err)
	info, err := c.Info(context.Background())
	require.NoError(e.t, err)
	return info.Paused
}

// closeOnce closes ch unless it is closed already.
func closeOnce(ch chan struct{}) {
	select {
	case <-ch:
	default:
		close(ch)
	}
}
