package consumers_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"

	"github.com/personaq/personaq/consumers"
	"github.com/personaq/personaq/consumers/ledger"
	"github.com/personaq/personaq/handlers"
	"github.com/personaq/personaq/schemas"
)

func TestRuntimeSucceeds(t *testing.T) {
	t.Parallel()
	h := newHarness(t, true)
	out := h.watchOutcomes()
	var c calls
	h.start(persona("echo", handlers.Func(func(_ context.Context, req *handlers.Request) (handlers.Result, error) {
		c.add(req, "r1")
		return handlers.Result{}, nil
	}), fastPolicy(3)))

	req := h.publish("echo", "t-ok")
	ev := out.wait(t, req.RequestID, 10*time.Second)
	require.Equal(t, schemas.OutcomeSucceeded, ev.Outcome)
	require.Equal(t, 1, ev.Attempts)
	require.Len(t, c.forTask("t-ok"), 1)
	require.Eventually(t, func() bool { return h.requestsLeft() == 0 }, 5*time.Second, 10*time.Millisecond)
}

func TestRuntimeRetriesWithPolicyDelaysThenSucceeds(t *testing.T) {
	t.Parallel()
	h := newHarness(t, true)
	out := h.watchOutcomes()
	var c calls
	h.start(persona("flaky", handlers.Func(func(_ context.Context, req *handlers.Request) (handlers.Result, error) {
		c.add(req, "r1")
		if req.Attempt < 3 {
			return handlers.Result{}, errors.New("transient")
		}
		return handlers.Result{}, nil
	}), fastPolicy(4)))

	req := h.publish("flaky", "t-flaky")
	ev := out.wait(t, req.RequestID, 10*time.Second)
	require.Equal(t, schemas.OutcomeSucceeded, ev.Outcome)
	require.Equal(t, 3, ev.Attempts)
	got := c.forTask("t-flaky")
	require.Len(t, got, 3)
	// Linear 50ms: 50ms before attempt 2, 100ms before attempt 3. Lower
	// bounds are strict (NakWithDelay never redelivers early); upper bounds
	// are generous because CI machines are shared.
	for i, want := range []time.Duration{50 * time.Millisecond, 100 * time.Millisecond} {
		gap := got[i+1].at.Sub(got[i].at)
		require.GreaterOrEqual(t, gap, want, "gap before attempt %d", i+2)
		require.Less(t, gap, want+2*time.Second, "gap before attempt %d", i+2)
	}
	require.Len(t, got[2].feedback, 2, "attempt 3 sees both earlier errors")
}

func TestRuntimeQuarantinesExhaustedWithHistory(t *testing.T) {
	t.Parallel()
	h := newHarness(t, true)
	out := h.watchOutcomes()
	h.start(persona("down", failing(handlers.Retryable, "upstream 503 on attempt %d"), fastPolicy(3)))

	req := h.publish("down", "t-exhaust")
	ev := out.wait(t, req.RequestID, 10*time.Second)
	require.Equal(t, schemas.OutcomeQuarantined, ev.Outcome)
	require.Equal(t, schemas.ReasonExhausted, ev.Reason)
	rec := h.quarantined(ev.QuarantineSeq)
	require.Equal(t, schemas.ReasonExhausted, rec.Reason)
	require.Equal(t, 3, rec.Attempts)
	require.Len(t, rec.Errors, 3)
	for i, e := range rec.Errors {
		require.Equal(t, i+1, e.Attempt)
		require.Equal(t, "retryable", e.Class)
		require.Contains(t, e.Error, "upstream 503")
	}
	require.Equal(t, "personaq.requests.down", rec.OriginalSubject)
	orig, err := schemas.DecodeRequest(rec.Payload)
	require.NoError(t, err)
	require.Equal(t, req.RequestID, orig.RequestID)
	require.Eventually(t, func() bool { return h.requestsLeft() == 0 }, 5*time.Second, 10*time.Millisecond)
}

func TestRuntimeQuarantinesTerminalAfterOneAttempt(t *testing.T) {
	t.Parallel()
	h := newHarness(t, true)
	out := h.watchOutcomes()
	var n atomic.Int32
	h.start(persona("strict", handlers.Func(func(context.Context, *handlers.Request) (handlers.Result, error) {
		n.Add(1)
		return handlers.Result{}, handlers.Terminal(errors.New("400 bad request"))
	}), fastPolicy(5)))

	req := h.publish("strict", "t-term")
	ev := out.wait(t, req.RequestID, 10*time.Second)
	require.Equal(t, schemas.ReasonTerminal, ev.Reason)
	require.EqualValues(t, 1, n.Load())
	require.Equal(t, 1, h.quarantined(ev.QuarantineSeq).Attempts)
}

func TestRuntimeQuarantinesMalformedMessage(t *testing.T) {
	t.Parallel()
	h := newHarness(t, true)
	out := h.watchOutcomes()
	var n atomic.Int32
	h.start(persona("echo", handlers.Func(func(context.Context, *handlers.Request) (handlers.Result, error) {
		n.Add(1)
		return handlers.Result{}, nil
	}), fastPolicy(3)))

	msg := nats.NewMsg("personaq.requests.echo")
	msg.Data = []byte(`{"schema_version":1,"task_id":"no request id"`)
	_, err := h.js.PublishMsg(context.Background(), msg)
	require.NoError(t, err)

	require.Eventually(t, func() bool { return out.count() == 1 }, 10*time.Second, 10*time.Millisecond)
	ev := out.all[0]
	require.Equal(t, schemas.ReasonInvalidMessage, ev.Reason)
	rec := h.quarantined(ev.QuarantineSeq)
	require.Equal(t, msg.Data, rec.Payload, "payload kept byte for byte")
	require.NotEmpty(t, rec.Detail)
	require.Zero(t, n.Load(), "handler never ran")
}

func TestRuntimeTreatsPanicAsTerminal(t *testing.T) {
	t.Parallel()
	h := newHarness(t, true)
	out := h.watchOutcomes()
	h.start(persona("crashy", handlers.Func(func(context.Context, *handlers.Request) (handlers.Result, error) {
		panic("nil map write")
	}), fastPolicy(4)))

	req := h.publish("crashy", "t-panic")
	ev := out.wait(t, req.RequestID, 10*time.Second)
	require.Equal(t, schemas.ReasonTerminal, ev.Reason)
	require.Contains(t, h.quarantined(ev.QuarantineSeq).Errors[0].Error, "nil map write")
}

func TestRuntimeHeartbeatsKeepLongAttemptsFromRedelivery(t *testing.T) {
	t.Parallel()
	h := newHarness(t, true)
	out := h.watchOutcomes()
	var c calls
	p := persona("slow", handlers.Func(func(ctx context.Context, req *handlers.Request) (handlers.Result, error) {
		c.add(req, "r1")
		select {
		case <-time.After(4500 * time.Millisecond): // 1.5 AckWaits, under the attempt timeout
		case <-ctx.Done():
			return handlers.Result{}, ctx.Err()
		}
		return handlers.Result{}, nil
	}), fastPolicy(3))
	// AckWait 3 s: heartbeats every ~1 s keep a margin for a loaded
	// machine (500 ms failed about one run in three under -race; 1 s failed
	// once with -cpu 1 at nice 10 beside a CPU hog, load ~25: a worker
	// stalled past it is lost, as it should be).
	p.AckWait = 3 * time.Second
	p.Policy.AttemptTimeout = 10 * time.Second
	h.start(p)

	req := h.publish("slow", "t-long")
	ev := out.wait(t, req.RequestID, 30*time.Second)
	require.Equal(t, schemas.OutcomeSucceeded, ev.Outcome)
	require.Len(t, c.forTask("t-long"), 1, "the server never redelivered the message while it ran")
}

func TestRuntimeTwoReplicasNeverRunTheSameMessage(t *testing.T) {
	t.Parallel()
	h := newHarness(t, true)
	out := h.watchOutcomes()
	var c calls
	mk := func(name string) consumers.Persona {
		p := persona("work", handlers.Func(func(ctx context.Context, req *handlers.Request) (handlers.Result, error) {
			c.add(req, name)
			time.Sleep(20 * time.Millisecond)
			return handlers.Result{}, nil
		}), fastPolicy(3))
		// A worker stalled past its AckWait is rightly taken for lost and its
		// message run again: 300 ms was overrun at load ~25 with -cpu 1
		// (294 runs of 200). Exactly once holds while heartbeats arrive.
		p.AckWait = 3 * time.Second
		return p
	}
	h.start(mk("r1"))
	h.start(mk("r2"))

	const total = 200
	ids := make([]string, total)
	for i := range total {
		ids[i] = h.publish("work", fmt.Sprintf("t-%d", i)).RequestID
	}
	for _, id := range ids {
		out.wait(t, id, 30*time.Second)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	require.Len(t, c.log, total, "every message ran exactly once")
	seen := map[string]bool{}
	for _, x := range c.log {
		seen[x.replica] = true
	}
	require.Len(t, seen, 2, "both replicas took work")
}

func TestRuntimeShutdownReleasesUnfinishedWorkWithoutCountingIt(t *testing.T) {
	t.Parallel()
	h := newHarness(t, true)
	out := h.watchOutcomes()
	var c calls
	started := make(chan struct{}, 1)
	blocking := persona("long", handlers.Func(func(ctx context.Context, req *handlers.Request) (handlers.Result, error) {
		c.add(req, "r1")
		started <- struct{}{}
		<-ctx.Done() // runs past the 2s drain timeout
		return handlers.Result{}, ctx.Err()
	}), fastPolicy(2))
	blocking.Policy.AttemptTimeout = time.Minute
	r1 := h.start(blocking)
	req := h.publish("long", "t-drain")
	<-started
	r1.stop() // SIGTERM path: drain 2s, then cancel with ErrShuttingDown

	h.start(persona("long", handlers.Func(func(_ context.Context, req *handlers.Request) (handlers.Result, error) {
		c.add(req, "r2")
		return handlers.Result{}, nil
	}), fastPolicy(2)))
	ev := out.wait(t, req.RequestID, 15*time.Second)
	require.Equal(t, schemas.OutcomeSucceeded, ev.Outcome)
	got := c.forTask("t-drain")
	require.Len(t, got, 2)
	require.Equal(t, 1, got[1].attempt, "the interrupted attempt was not counted")
	require.Equal(t, "r2", got[1].replica)
}

func TestRuntimeDrainLetsInFlightWorkFinish(t *testing.T) {
	t.Parallel()
	h := newHarness(t, true)
	out := h.watchOutcomes()
	started := make(chan struct{}, 1)
	r := h.start(persona("tidy", handlers.Func(func(context.Context, *handlers.Request) (handlers.Result, error) {
		started <- struct{}{}
		time.Sleep(300 * time.Millisecond) // well inside the drain timeout
		return handlers.Result{}, nil
	}), fastPolicy(2)))
	req := h.publish("tidy", "t-tidy")
	<-started
	r.stop()
	ev := out.wait(t, req.RequestID, 5*time.Second)
	require.Equal(t, schemas.OutcomeSucceeded, ev.Outcome)
	// The ack went out before Run returned (plain acks are flushed at
	// Close); the server applies acks off its read loop.
	require.Eventually(t, func() bool { return h.requestsLeft() == 0 }, 2*time.Second, 10*time.Millisecond)
}

// A runtime without an attempt ledger is a choice, never a default: New
// refuses the missing ledger by name unless WithoutLedger says so, and
// refuses a ledger that is not one (a nil *ledger.Ledger, which Run would
// dereference) or that contradicts WithoutLedger.
func TestNewRequiresALedgerOrSayingSo(t *testing.T) {
	t.Parallel()
	h := newHarness(t, true)
	p := persona("p", handlers.Func(func(context.Context, *handlers.Request) (handlers.Result, error) {
		return handlers.Result{}, nil
	}), fastPolicy(2))
	var nilLedger *ledger.Ledger
	for _, c := range []struct {
		name    string
		led     consumers.Ledger
		without bool
		refused string // "" = accepted
	}{
		{"no ledger", nil, false, "ledger: required"},
		{"no ledger, on purpose", nil, true, ""},
		{"a ledger", h.ledger, false, ""},
		{"a nil *ledger.Ledger", nilLedger, false, "ledger: a nil *ledger.Ledger"},
		{"a nil *ledger.Ledger, without", nilLedger, true, "ledger: a nil *ledger.Ledger"},
		{"a ledger and WithoutLedger", h.ledger, true, "ledger: set together with WithoutLedger"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := consumers.New(consumers.Config{JetStream: h.js, Personas: []consumers.Persona{p}, Ledger: c.led, WithoutLedger: c.without})
			if c.refused == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, consumers.ErrInvalidConfig)
			require.ErrorContains(t, err, c.refused)
		})
	}
}

// HandlerMiddleware wraps every persona's handler, the first listed
// outermost, and sees each attempt.
func TestHandlerMiddlewareWrapsEveryAttempt(t *testing.T) {
	t.Parallel()
	h := newHarness(t, true)
	out := h.watchOutcomes()
	var mu sync.Mutex
	var trail []string
	mw := func(name string) func(consumers.Handler) consumers.Handler {
		return func(next consumers.Handler) consumers.Handler {
			return consumers.HandlerFunc(func(ctx context.Context, req *consumers.Request) (consumers.Result, error) {
				mu.Lock()
				trail = append(trail, fmt.Sprintf("%s>%d", name, req.Attempt))
				mu.Unlock()
				res, err := next.Handle(ctx, req)
				mu.Lock()
				trail = append(trail, fmt.Sprintf("%s<%d", name, req.Attempt))
				mu.Unlock()
				return res, err
			})
		}
	}
	p := persona("wrapped", consumers.HandlerFunc(func(_ context.Context, req *consumers.Request) (consumers.Result, error) {
		if req.Attempt == 1 {
			return consumers.Result{}, errors.New("first attempt fails")
		}
		return consumers.Result{}, nil
	}), fastPolicy(3))
	h.startMod(func(c *consumers.Config) {
		c.HandlerMiddleware = []func(consumers.Handler) consumers.Handler{mw("outer"), mw("inner")}
	}, p)
	ev := out.wait(t, h.publish("wrapped", "t-mw").RequestID, 10*time.Second)
	require.Equal(t, schemas.OutcomeSucceeded, ev.Outcome)
	mu.Lock()
	defer mu.Unlock()
	require.Equal(t, []string{"outer>1", "inner>1", "inner<1", "outer<1", "outer>2", "inner>2", "inner<2", "outer<2"}, trail)
}
