package consumers_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/personaq/personaq/consumers/wire"
	"github.com/personaq/personaq/handlers"
	"github.com/personaq/personaq/retry"
	"github.com/personaq/personaq/schemas"
)

// cancel cancels req as a caller would.
func (h *harness) cancel(req *schemas.PersonaRequest, why string) *schemas.OutcomeEvent {
	h.t.Helper()
	rec, err := wire.Cancel(context.Background(), h.js, h.topo, wire.Cancellation{
		RequestID: req.RequestID, Persona: req.Persona, TaskID: req.TaskID, Step: req.Step, Reason: why, By: "test"})
	require.NoError(h.t, err)
	return rec
}

// quarantineCount is how many records the quarantine stream holds.
func (h *harness) quarantineCount() uint64 {
	h.t.Helper()
	s, err := h.js.Stream(context.Background(), h.topo.QuarantineStream)
	require.NoError(h.t, err)
	info, err := s.Info(context.Background())
	require.NoError(h.t, err)
	return info.State.Msgs
}

// attemptKinds collects the attempt events of every request by kind.
func (h *harness) attemptKinds() func(kind schemas.AttemptKind) int {
	h.t.Helper()
	var started, failed, cancelled atomic.Int32
	cons, err := h.js.OrderedConsumer(context.Background(), h.topo.AttemptsStream, jetstream.OrderedConsumerConfig{})
	require.NoError(h.t, err)
	cc, err := cons.Consume(func(m jetstream.Msg) {
		ev, err := schemas.DecodeAttemptEvent(m.Data())
		if err != nil {
			return
		}
		switch ev.Kind {
		case schemas.AttemptStarted:
			started.Add(1)
		case schemas.AttemptFailed:
			failed.Add(1)
		case schemas.AttemptCancelled:
			cancelled.Add(1)
		}
	})
	require.NoError(h.t, err)
	h.t.Cleanup(cc.Stop)
	return func(kind schemas.AttemptKind) int {
		switch kind {
		case schemas.AttemptStarted:
			return int(started.Load())
		case schemas.AttemptFailed:
			return int(failed.Load())
		}
		return int(cancelled.Load())
	}
}

// blocking is a handler that counts its runs and blocks until its context
// ends (then returns its cause) or release is closed (then succeeds).
type blocking struct {
	runs    atomic.Int32
	started chan string
	release chan struct{}
	causes  chan error
}

func newBlocking() *blocking {
	return &blocking{started: make(chan string, 16), release: make(chan struct{}), causes: make(chan error, 16)}
}

func (b *blocking) Handle(ctx context.Context, req *handlers.Request) (handlers.Result, error) {
	b.runs.Add(1)
	select {
	case b.started <- req.Message.RequestID:
	default: // nobody waits for this one
	}
	select {
	case <-b.release:
		return handlers.Result{Output: []byte(`"done"`)}, nil
	case <-ctx.Done():
		b.causes <- context.Cause(ctx)
		return handlers.Result{}, handlers.Retryable(context.Cause(ctx))
	}
}

func waitStarted(t *testing.T, b *blocking) string {
	t.Helper()
	select {
	case id := <-b.started:
		return id
	case <-time.After(10 * time.Second):
		t.Fatal("the handler did not start")
	}
	return ""
}

func TestCancelQueuedNeverRuns(t *testing.T) {
	t.Parallel()
	t.Run("BeforeTheReplicaStarts", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t, true)
		outs := h.watchOutcomes()
		b := newBlocking()
		close(b.release)
		req := h.publish("echo", "queued-1")
		h.cancel(req, "workflow cancelled")
		h.start(persona("echo", b, fastPolicy(3)))
		ok := h.publish("echo", "queued-2")
		require.Equal(t, schemas.OutcomeSucceeded, outs.wait(t, ok.RequestID, 10*time.Second).Outcome)
		require.Eventually(t, func() bool { return h.requestsLeft() == 0 }, 10*time.Second, 20*time.Millisecond)
		require.EqualValues(t, 1, b.runs.Load(), "only the request not cancelled ran")
		require.Equal(t, schemas.OutcomeCancelled, outs.wait(t, req.RequestID, time.Second).Outcome)
		require.Zero(t, h.quarantineCount())
	})
	t.Run("BehindABusySlot", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t, true)
		outs := h.watchOutcomes()
		b := newBlocking()
		p := persona("echo", b, fastPolicy(3))
		p.Concurrency = 1
		h.start(p)
		first := h.publish("echo", "busy")
		waitStarted(t, b)
		queued := h.publish("echo", "queued")
		h.cancel(queued, "not needed any more")
		close(b.release)
		require.Equal(t, schemas.OutcomeSucceeded, outs.wait(t, first.RequestID, 10*time.Second).Outcome)
		require.Eventually(t, func() bool { return h.requestsLeft() == 0 }, 10*time.Second, 20*time.Millisecond)
		require.EqualValues(t, 1, b.runs.Load(), "the cancelled request never ran")
		require.Equal(t, schemas.OutcomeCancelled, outs.wait(t, queued.RequestID, time.Second).Outcome)
	})
}

// A retry waiting for its delay (held by the replica, or NakWithDelay'd
// to the server) ends at once and runs no further attempt.
func TestCancelWaitingRetry(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		delay time.Duration
	}{{"HeldByTheReplica", 1500 * time.Millisecond}, {"NakWithDelay", 6 * time.Second}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, true)
			outs := h.watchOutcomes()
			kinds := h.attemptKinds()
			var runs atomic.Int32
			fail := handlers.Func(func(context.Context, *handlers.Request) (handlers.Result, error) {
				runs.Add(1)
				return handlers.Result{}, handlers.Retryable(errors.New("provider overloaded"))
			})
			pol := fastPolicy(3)
			pol.Schedule = retry.Fixed{Every: tc.delay}
			h.start(persona("flaky", fail, pol))
			req := h.publish("flaky", "retrying")
			require.Eventually(t, func() bool { return kinds(schemas.AttemptFailed) == 1 }, 10*time.Second, 10*time.Millisecond)
			h.cancel(req, "stop retrying")
			require.Equal(t, schemas.OutcomeCancelled, outs.wait(t, req.RequestID, time.Second).Outcome, "ends at once")
			require.Eventually(t, func() bool { return h.requestsLeft() == 0 }, tc.delay+5*time.Second, 20*time.Millisecond)
			time.Sleep(200 * time.Millisecond) // an attempt that wrongly started would show by now
			require.EqualValues(t, 1, runs.Load(), "no further attempt")
			require.Equal(t, 1, kinds(schemas.AttemptStarted))
			require.Equal(t, 1, outs.count())
			require.Zero(t, h.quarantineCount())
		})
	}
}

// A running Go handler sees context.Cause(ctx) == ErrCancelled; the
// attempt is recorded as cancelled, not as a failure, and nothing goes to
// the quarantine.
func TestCancelRunningGoHandler(t *testing.T) {
	t.Parallel()
	h := newHarness(t, true)
	outs := h.watchOutcomes()
	kinds := h.attemptKinds()
	b := newBlocking()
	h.start(persona("planner", b, fastPolicy(3)))
	req := h.publish("planner", "running")
	waitStarted(t, b)
	t0 := time.Now()
	h.cancel(req, "workflow cancelled upstream")
	select {
	case cause := <-b.causes:
		require.Equal(t, wire.ErrCancelled, cause)
	case <-time.After(5 * time.Second):
		t.Fatal("the running attempt was not cancelled")
	}
	t.Logf("cancel to handler stopped: %s", time.Since(t0))
	rec := outs.wait(t, req.RequestID, time.Second)
	require.Equal(t, schemas.OutcomeCancelled, rec.Outcome)
	require.Equal(t, "workflow cancelled upstream", rec.Detail)
	require.Eventually(t, func() bool { return kinds(schemas.AttemptCancelled) == 1 }, 5*time.Second, 10*time.Millisecond)
	require.Eventually(t, func() bool { return h.requestsLeft() == 0 }, 5*time.Second, 10*time.Millisecond)
	require.Zero(t, kinds(schemas.AttemptFailed), "a cancelled attempt is not a failure")
	require.EqualValues(t, 1, b.runs.Load())
	require.Zero(t, h.quarantineCount())
	require.Equal(t, 1, outs.count())
}

// A running HTTP persona's request is aborted.
func TestCancelRunningHTTPPersona(t *testing.T) {
	t.Parallel()
	h := newHarness(t, true)
	outs := h.watchOutcomes()
	arrived, aborted := make(chan struct{}, 1), make(chan struct{}, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.ReadAll(r.Body) // net/http sees the client hang up only once the body is read
		arrived <- struct{}{}
		select {
		case <-r.Context().Done():
			aborted <- struct{}{}
		case <-time.After(20 * time.Second):
			_, _ = w.Write([]byte(`{"ok":true}`))
		}
	}))
	t.Cleanup(srv.Close)
	inv, err := handlers.NewHTTP(handlers.HTTPConfig{URL: srv.URL})
	require.NoError(t, err)
	pol := fastPolicy(3)
	pol.AttemptTimeout = 30 * time.Second
	h.start(persona("remote", inv, pol))
	req := h.publish("remote", "http")
	select {
	case <-arrived:
	case <-time.After(10 * time.Second):
		t.Fatal("the persona server got no request")
	}
	h.cancel(req, "stop")
	select {
	case <-aborted:
	case <-time.After(5 * time.Second):
		t.Fatal("the persona's HTTP request was not aborted")
	}
	require.Equal(t, schemas.OutcomeCancelled, outs.wait(t, req.RequestID, time.Second).Outcome)
	require.Eventually(t, func() bool { return h.requestsLeft() == 0 }, 5*time.Second, 10*time.Millisecond)
	require.Zero(t, h.quarantineCount())
}

// Cancelling a request that already ended changes nothing: the record
// that stands is returned with ErrAlreadyEnded.
func TestCancelAlreadyTerminal(t *testing.T) {
	t.Parallel()
	h := newHarness(t, true)
	outs := h.watchOutcomes()
	b := newBlocking()
	close(b.release)
	h.start(persona("echo", b, fastPolicy(3)))
	req := h.publish("echo", "done")
	require.Equal(t, schemas.OutcomeSucceeded, outs.wait(t, req.RequestID, 10*time.Second).Outcome)
	rec, err := wire.Cancel(context.Background(), h.js, h.topo, wire.Cancellation{RequestID: req.RequestID, Persona: "echo"})
	require.ErrorIs(t, err, wire.ErrAlreadyEnded)
	require.Equal(t, schemas.OutcomeSucceeded, rec.Outcome)
	time.Sleep(100 * time.Millisecond)
	require.Equal(t, 1, outs.count())
}

// Checking a delivery for a cancel costs no round trip: a replica that
// read the cancelled records at start and follows the notices reads no
// terminal record for first deliveries, whether they were published
// before it started or after (a lookup each would be a JetStream API
// request on the outcomes stream).
func TestCancelCheckCostsNoLookupPerDelivery(t *testing.T) {
	t.Parallel()
	h := newHarness(t, true)
	outs := h.watchOutcomes()
	spy := h.nats.Conn(t)
	var lookups atomic.Int32
	sub, err := spy.Subscribe("$JS.API.>", func(m *nats.Msg) {
		if strings.Contains(m.Subject, h.topo.OutcomesStream) && (strings.Contains(m.Subject, "MSG.GET") || strings.Contains(m.Subject, "DIRECT.GET")) {
			lookups.Add(1)
		}
	})
	require.NoError(t, err)
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	require.NoError(t, spy.Flush())
	b := newBlocking()
	close(b.release)
	var reqs []*schemas.PersonaRequest
	for range 100 {
		reqs = append(reqs, h.publish("echo", "cost"))
	}
	h.cancel(reqs[0], "one cancelled before the replica starts")
	h.start(persona("echo", b, fastPolicy(3)))
	for range 100 {
		reqs = append(reqs, h.publish("echo", "cost"))
	}
	for _, r := range reqs {
		outs.wait(t, r.RequestID, 20*time.Second)
	}
	require.EqualValues(t, 199, b.runs.Load())
	require.Zero(t, lookups.Load(), "terminal record lookups for 200 first deliveries")
}

// A cancelled record stored by any writer (here straight through the
// create-once write, as a canceller that died right after it would leave
// it) stops a queued request: the record's own publish is the notice.
func TestCancelRecordAloneStopsQueuedRequest(t *testing.T) {
	t.Parallel()
	h := newHarness(t, true)
	outs := h.watchOutcomes()
	b := newBlocking()
	p := persona("echo", b, fastPolicy(3))
	p.Concurrency = 1
	h.start(p)
	first := h.publish("echo", "busy")
	waitStarted(t, b)
	queued := h.publish("echo", "queued")
	rec := wire.CancellationOf(queued, "written alone", "test").CancelledRecord(time.Now())
	_, won, err := wire.NewOutcomes(h.js, h.topo).Create(context.Background(), rec, nil)
	require.NoError(t, err)
	require.True(t, won)
	time.Sleep(100 * time.Millisecond) // the record reaches the replica
	close(b.release)
	require.Equal(t, schemas.OutcomeSucceeded, outs.wait(t, first.RequestID, 10*time.Second).Outcome)
	require.Eventually(t, func() bool { return h.requestsLeft() == 0 }, 10*time.Second, 20*time.Millisecond)
	require.EqualValues(t, 1, b.runs.Load(), "the cancelled request never ran")
}

// A cancel right after NATS restarts reaches the running attempt: the
// replica's subscription comes back with its connection, and a cancel
// stored before it did is read by the catch-up after the reconnect.
func TestCancelAfterNATSRestart(t *testing.T) {
	t.Parallel()
	h := newHarness(t, true)
	b := newBlocking()
	policy := fastPolicy(3)
	// Far longer than a broker restart and reconnect take on a loaded
	// machine (CI saw over 4 s): the attempt must still be running when
	// the cancel arrives.
	policy.AttemptTimeout = 30 * time.Second
	h.start(persona("planner", b, policy))
	req := h.publish("planner", "restart")
	waitStarted(t, b)
	h.nats.Restart(t)
	var rec *schemas.OutcomeEvent
	require.Eventually(t, func() bool { // the canceller's own connection comes back too
		var err error
		rec, err = wire.Cancel(context.Background(), h.js, h.topo, wire.Cancellation{
			RequestID: req.RequestID, Persona: req.Persona, TaskID: req.TaskID, Step: req.Step, Reason: "after a restart"})
		return err == nil
	}, 10*time.Second, 20*time.Millisecond)
	require.Equal(t, schemas.OutcomeCancelled, rec.Outcome)
	select {
	case cause := <-b.causes:
		require.Equal(t, wire.ErrCancelled, cause)
	case <-time.After(10 * time.Second):
		t.Fatal("the running attempt was not stopped after NATS restarted")
	}
	require.Eventually(t, func() bool { return h.requestsLeft() == 0 }, 10*time.Second, 20*time.Millisecond)
	require.EqualValues(t, 1, b.runs.Load())
}
