package client_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"

	"github.com/personaq/personaq/consumers"
	"github.com/personaq/personaq/consumers/client"
	"github.com/personaq/personaq/consumers/ledger"
	"github.com/personaq/personaq/consumers/wire"
	"github.com/personaq/personaq/handlers"
	"github.com/personaq/personaq/integration/testenv"
	"github.com/personaq/personaq/retry"
	"github.com/personaq/personaq/schemas"
)

type env struct {
	t     testing.TB
	nats  *testenv.NATS
	js    jetstream.JetStream
	redis *testenv.Redis
	led   consumers.Ledger
	log   zerolog.Logger
	c     *client.Client
}

func newEnv(t testing.TB, withLedger bool) *env {
	t.Helper()
	n := testenv.StartNATS(t)
	e := &env{t: t, nats: n, js: n.JetStream(t), log: zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.InfoLevel)}
	if withLedger {
		e.redis = testenv.StartRedis(t)
		l, err := ledger.New(ledger.Config{Client: e.redis.Client(t)})
		require.NoError(t, err)
		e.led = l
	}
	c, err := client.New(client.Config{JetStream: e.js, Logger: &e.log, RecordGrace: 3 * time.Second})
	require.NoError(t, err)
	e.c = c
	return e
}

func policy(attempts int, timeout time.Duration) retry.Policy {
	return retry.Policy{Name: "test", MaxAttempts: attempts, AttemptTimeout: timeout,
		Schedule: retry.Linear{Step: 50 * time.Millisecond}, NetworkDelay: 50 * time.Millisecond}
}

// serve runs one replica with the given personas until the test ends (or
// stop is called).
func (e *env) serve(cfg consumers.Config, personas ...consumers.Persona) (stop func()) {
	e.t.Helper()
	cfg.JetStream, cfg.Personas, cfg.Ledger, cfg.Logger = e.js, personas, e.led, &e.log
	cfg.WithoutLedger = e.led == nil
	cfg.DrainTimeout, cfg.FetchMaxWait = 2*time.Second, 200*time.Millisecond
	rt, err := consumers.New(cfg)
	require.NoError(e.t, err)
	require.NoError(e.t, rt.Provision(context.Background()))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = rt.Run(ctx) }()
	var once sync.Once
	stop = func() { once.Do(func() { cancel(); <-done }) }
	e.t.Cleanup(stop)
	return stop
}

// records returns every terminal record stored for requestID.
func (e *env) records(requestID string) []*schemas.OutcomeEvent {
	e.t.Helper()
	topo := wire.Topology{}.WithDefaults()
	cons, err := e.js.OrderedConsumer(context.Background(), topo.OutcomesStream, jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{topo.OutcomeFilter(requestID)},
	})
	require.NoError(e.t, err)
	var out []*schemas.OutcomeEvent
	for {
		m, err := cons.Next(jetstream.FetchMaxWait(300 * time.Millisecond))
		if errors.Is(err, jetstream.ErrNoMessages) || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrTimeout) {
			return out
		}
		require.NoError(e.t, err)
		ev, err := schemas.DecodeOutcome(m.Data())
		require.NoError(e.t, err)
		out = append(out, ev)
	}
}

func echoOutput(size int) handlers.Func {
	return func(_ context.Context, req *handlers.Request) (handlers.Result, error) {
		out, _ := json.Marshal(map[string]string{"plan": strings.Repeat("x", size)})
		return handlers.Result{Output: out}, nil
	}
}

func TestOutputRoundTrip(t *testing.T) {
	t.Parallel()
	e := newEnv(t, true)
	e.serve(consumers.Config{}, consumers.Persona{Name: "planner", Handler: handlers.Func(
		func(_ context.Context, req *handlers.Request) (handlers.Result, error) {
			var in struct{ Size int }
			_ = json.Unmarshal(req.Message.Input, &in)
			out, _ := json.Marshal(strings.Repeat("p", in.Size))
			return handlers.Result{Output: out}, nil
		}), Policy: policy(2, 30*time.Second)})
	for _, tc := range []struct {
		name string
		size int
	}{{"1B", 1}, {"100KiB", 100 << 10}, {"8MiB", 8 << 20}} {
		t.Run(tc.name, func(t *testing.T) {
			req := schemas.NewRequest("story-"+tc.name, "plan", "planner")
			req.Input = json.RawMessage(`{"size":` + jsonInt(tc.size) + `}`)
			res, err := e.c.Run(context.Background(), req)
			require.NoError(t, err)
			want, _ := json.Marshal(strings.Repeat("p", tc.size))
			require.True(t, bytes.Equal(want, res.Output), "output differs: got %d bytes, want %d", len(res.Output), len(want))
			require.Equal(t, schemas.OutcomeSucceeded, res.Record.Outcome)
			inline := len(want) <= wire.DefaultInlineOutputMax
			require.Equal(t, inline, res.Record.OutputRef == nil, "inline output iff small")
			// A later Await (say, after the caller restarted) reads the same.
			again, err := e.c.Await(context.Background(), req.RequestID)
			require.NoError(t, err)
			require.True(t, bytes.Equal(want, again.Output))
			require.Len(t, e.records(req.RequestID), 1)
		})
	}
}

func jsonInt(n int) string { b, _ := json.Marshal(n); return string(b) }

func TestRunLogsTheStepBudgetAndFailsBlockedWhenExhausted(t *testing.T) {
	t.Parallel()
	e := newEnv(t, true)
	e.serve(consumers.Config{}, consumers.Persona{Name: "context", Handler: handlers.Func(
		func(context.Context, *handlers.Request) (handlers.Result, error) {
			return handlers.Result{Output: json.RawMessage(`{"half":"answer"}`)}, errors.New("model overloaded")
		}), Policy: policy(3, 2*time.Second)})
	var attempts []string
	var mu sync.Mutex
	req := schemas.NewRequest("story-1", "context_request", "context")
	_, err := e.c.Run(context.Background(), req, client.OnAttempt(func(ev *schemas.AttemptEvent) {
		mu.Lock()
		defer mu.Unlock()
		attempts = append(attempts, string(ev.Kind)+jsonInt(ev.Attempt))
	}))
	var stopped *client.StoppedError
	require.ErrorAs(t, err, &stopped)
	require.ErrorIs(t, err, client.ErrBlocked)
	require.Equal(t, schemas.ReasonExhausted, stopped.Record.Reason)
	require.True(t, stopped.Record.Blocked)
	require.NotZero(t, stopped.Record.QuarantineSeq)
	require.Equal(t, 3, stopped.Record.Attempts)
	require.Contains(t, stopped.Record.LastError, "model overloaded")
	mu.Lock()
	require.Contains(t, attempts, "failed3")
	require.Contains(t, attempts, "started1")
	mu.Unlock()
	// Budget: 3 attempts × 2s + 50ms + 100ms + 30s buffer.
	b, err := e.c.Budget(context.Background(), req)
	require.NoError(t, err)
	require.Equal(t, 6*time.Second+150*time.Millisecond+30*time.Second, b.StepDeadline)
}

func TestSubmitRefusesUnknownPersonaAndPolicy(t *testing.T) {
	t.Parallel()
	e := newEnv(t, false)
	e.serve(consumers.Config{}, consumers.Persona{Name: "planner", Handler: echoOutput(1), Policy: policy(2, time.Second)})
	_, err := e.c.Submit(context.Background(), schemas.NewRequest("t", "s", "planer"))
	require.ErrorIs(t, err, client.ErrUnknownPersona)
	require.ErrorContains(t, err, "served: planner")
	req := schemas.NewRequest("t", "s", "planner")
	req.Policy = "no-such-preset"
	_, err = e.c.Submit(context.Background(), req)
	require.ErrorContains(t, err, "no-such-preset")
	_, err = e.c.Submit(context.Background(), schemas.NewRequest("t", "s", "planer"), client.SkipPersonaCheck())
	require.NoError(t, err)
}

func TestAwaitSurvivesACallerRestart(t *testing.T) {
	t.Parallel()
	e := newEnv(t, true)
	release := make(chan struct{})
	e.serve(consumers.Config{}, consumers.Persona{Name: "planner", Handler: handlers.Func(
		func(ctx context.Context, _ *handlers.Request) (handlers.Result, error) {
			select {
			case <-release:
			case <-ctx.Done():
				return handlers.Result{}, ctx.Err()
			}
			return handlers.Result{Output: json.RawMessage(`"the plan"`)}, nil
		}), Policy: policy(2, 30*time.Second)})
	req := schemas.NewRequest("story-2", "plan", "planner")
	_, err := e.c.Submit(context.Background(), req)
	require.NoError(t, err)
	// The first caller gives up (it is restarting) while the persona works.
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	_, err = e.c.Await(ctx, req.RequestID)
	cancel()
	require.ErrorIs(t, err, context.DeadlineExceeded)
	close(release)
	// The restarted caller, a new client, awaits the same request id.
	c2, err := client.New(client.Config{JetStream: e.nats.JetStream(t)})
	require.NoError(t, err)
	res, err := c2.Await(context.Background(), req.RequestID)
	require.NoError(t, err)
	require.JSONEq(t, `"the plan"`, string(res.Output))
}

func TestStepDeadlineEndsTheRequestOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t, true)
	var runs atomic.Int32
	e.serve(consumers.Config{}, consumers.Persona{Name: "slow", Handler: handlers.Func(
		func(ctx context.Context, _ *handlers.Request) (handlers.Result, error) {
			runs.Add(1)
			<-ctx.Done()
			return handlers.Result{}, ctx.Err()
		}), Policy: policy(5, 20*time.Second)})
	req := schemas.NewRequest("story-3", "plan", "slow")
	// The attempt must start before the deadline cuts it: 700 ms passed
	// before the first delivery (0 runs) under -race -cpu 1 at nice 10
	// beside a CPU hog.
	sub, err := e.c.Submit(context.Background(), req, client.WithDeadline(time.Now().Add(3*time.Second)))
	require.NoError(t, err)
	_, err = e.c.Await(context.Background(), sub.RequestID)
	require.ErrorIs(t, err, client.ErrStepDeadline)
	var stopped *client.StoppedError
	require.ErrorAs(t, err, &stopped)
	require.Equal(t, schemas.ReasonDeadlineExceeded, stopped.Record.Reason)
	require.Equal(t, int32(1), runs.Load(), "cut at the deadline, never retried")
	require.Len(t, e.records(req.RequestID), 1)
}

func TestDeliveryPastTheDeadlineIsNotRun(t *testing.T) {
	t.Parallel()
	e := newEnv(t, false)
	var runs atomic.Int32
	e.serve(consumers.Config{}, consumers.Persona{Name: "echo", Handler: handlers.Func(
		func(context.Context, *handlers.Request) (handlers.Result, error) {
			runs.Add(1)
			return handlers.Result{}, nil
		}), Policy: policy(2, time.Second)})
	req := schemas.NewRequest("story-4", "plan", "echo")
	_, err := e.c.Submit(context.Background(), req, client.WithDeadline(time.Now().Add(-time.Second)))
	require.NoError(t, err)
	_, err = e.c.Await(context.Background(), req.RequestID)
	require.ErrorIs(t, err, client.ErrStepDeadline)
	require.Zero(t, runs.Load())
}
