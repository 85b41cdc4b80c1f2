package consumers_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"

	"github.com/personaq/personaq/consumers"
	"github.com/personaq/personaq/handlers"
	"github.com/personaq/personaq/schemas"
)

// A replica asked to stop pulls nothing more while it drains (a request
// published after the stop waits for another replica), and a retry it was
// holding (a Retry-After short enough to hold locally) is released with
// the delay it still had, not at once.
func TestDrainPullsNothingAndHeldRetriesKeepTheirDelay(t *testing.T) {
	t.Parallel()
	h := newHarness(t, true)
	out := h.watchOutcomes()
	const retryAfter = 3 * time.Second
	var (
		mu      sync.Mutex
		runs    = map[string][]time.Time{} // task → start of each attempt
		failed  = make(chan time.Time, 1)
		release = make(chan struct{})
		slowRun = make(chan struct{}, 1)
	)
	handler := handlers.Func(func(ctx context.Context, req *handlers.Request) (handlers.Result, error) {
		mu.Lock()
		runs[req.Message.TaskID] = append(runs[req.Message.TaskID], time.Now())
		mu.Unlock()
		switch {
		case req.Message.TaskID == "t-held" && req.Attempt == 1:
			defer func() { failed <- time.Now() }()
			return handlers.Result{}, handlers.After(retryAfter, errors.New("rate limited"))
		case req.Message.TaskID == "t-slow":
			slowRun <- struct{}{}
			select {
			case <-release:
			case <-ctx.Done():
				return handlers.Result{}, ctx.Err()
			}
		}
		return handlers.Result{}, nil
	})
	p := persona("drainer", handler, fastPolicy(3))
	p.AckWait = 2 * time.Second
	r1 := h.startMod(func(c *consumers.Config) { c.DrainTimeout = 20 * time.Second }, p)

	held := h.publish("drainer", "t-held")
	failedAt := <-failed
	h.publish("drainer", "t-slow")
	<-slowRun // r1 is now busy with the slow attempt and holds the retry

	r1.cancel() // SIGTERM
	stopped := make(chan struct{})
	go func() { r1.stop(); close(stopped) }()
	// r1 is draining (the slow attempt keeps it): a request published now
	// must not be pulled by it, for several of its fetch waits.
	require.Eventually(t, func() bool { return r1.rt.Ready() != nil }, 5*time.Second, 10*time.Millisecond, "draining: not ready")
	late := h.publish("drainer", "t-late")
	require.Never(t, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(runs["t-late"]) > 0
	}, 600*time.Millisecond, 20*time.Millisecond, "a draining replica pulled a request published after its stop")
	close(release)
	<-stopped

	h.start(p) // another replica takes what r1 released and what it never pulled
	require.Equal(t, schemas.OutcomeSucceeded, out.wait(t, late.RequestID, 15*time.Second).Outcome)
	ev := out.wait(t, held.RequestID, 15*time.Second)
	require.Equal(t, schemas.OutcomeSucceeded, ev.Outcome)
	mu.Lock()
	defer mu.Unlock()
	require.Len(t, runs["t-held"], 2)
	require.GreaterOrEqual(t, runs["t-held"][1].Sub(failedAt), retryAfter-300*time.Millisecond,
		"the held retry kept its Retry-After through the drain")
}

// A replica stopped while it is starting stops cleanly, at whatever point
// of its start the stop lands: Run returns, and nothing it started is left
// running (the package's TestMain checks for leaked goroutines). The stop
// that used to leak (between the subscribers' close and the router's
// subscribe, a window of microseconds) is pinned deterministically by
// transport's TestSubscribeWhileStoppingGivesAClosedChannel; this one
// sweeps the start as a whole.
func TestStopWhileStartingLeavesNothingRunning(t *testing.T) {
	t.Parallel()
	h := newHarness(t, false)
	noop := handlers.Func(func(context.Context, *handlers.Request) (handlers.Result, error) { return handlers.Result{}, nil })
	for i := range 10 {
		log := zerolog.Nop()
		rt, err := consumers.New(consumers.Config{
			JetStream: h.js, WithoutLedger: true, Logger: &log, FetchMaxWait: 100 * time.Millisecond,
			Personas: []consumers.Persona{persona("a", noop, fastPolicy(2)), persona("b", noop, fastPolicy(2))},
		})
		require.NoError(t, err)
		ctx, cancel := context.WithTimeout(context.Background(), time.Duration(i)*4*time.Millisecond)
		done := make(chan error, 1)
		go func() { done <- rt.Run(ctx) }()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			t.Fatalf("run %d: Run did not return after a stop %s into its start", i, time.Duration(i)*4*time.Millisecond)
		}
		cancel()
	}
}
