package consumers_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/personaq/personaq/handlers"
	"github.com/personaq/personaq/retry"
	"github.com/personaq/personaq/schemas"
)

// A request not started within its queue wait (the persona's policy, or
// the request's own override) ends once, unrun, with its own reason.
func TestQueueWaitEndsUnstartedRequest(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		persona time.Duration
		request int64
	}{{"PerPersona", 300 * time.Millisecond, 0}, {"PerRequest", 0, 300}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, true)
			outs := h.watchOutcomes()
			b := newBlocking()
			pol := fastPolicy(3)
			pol.QueueWait = tc.persona
			p := persona("planner", b, pol)
			p.Concurrency = 1
			h.start(p)
			// The request that holds the slot has a queue wait of its own a
			// loaded machine cannot overrun: the persona's 300 ms ended it
			// unrun in 7 runs of 16 beside a CPU hog ("the handler did not
			// start"). The request under test keeps the wait of its case.
			busy := h.publish("planner", "busy", func(r *schemas.PersonaRequest) {
				r.PolicyOverrides = &schemas.PolicyOverrides{QueueWaitMs: time.Minute.Milliseconds()}
			})
			waitStarted(t, b)
			late := h.publish("planner", "behind-a-backlog", func(r *schemas.PersonaRequest) {
				if tc.request > 0 {
					r.PolicyOverrides = &schemas.PolicyOverrides{QueueWaitMs: tc.request}
				}
			})
			time.Sleep(500 * time.Millisecond)
			close(b.release)
			rec := outs.wait(t, late.RequestID, 10*time.Second)
			require.Equal(t, schemas.OutcomeDeadlineExceeded, rec.Outcome)
			require.Equal(t, schemas.ReasonQueueWaitExceeded, rec.Reason)
			require.Zero(t, rec.Attempts)
			require.Contains(t, rec.Detail, "queue wait of 300ms")
			require.Eventually(t, func() bool { return h.requestsLeft() == 0 }, 10*time.Second, 20*time.Millisecond)
			require.Equal(t, schemas.OutcomeSucceeded, outs.wait(t, busy.RequestID, 10*time.Second).Outcome,
				"the request that started in time ran to its end")
			require.EqualValues(t, 1, b.runs.Load(), "the late request never ran")
			require.Zero(t, h.quarantineCount())
			require.Equal(t, 2, outs.count())
		})
	}
}

// A request that started in time is not ended by its queue wait when a
// retry comes back after it.
func TestQueueWaitSparesAStartedRequest(t *testing.T) {
	t.Parallel()
	h := newHarness(t, true)
	outs := h.watchOutcomes()
	// Long enough for a first delivery on a loaded machine (200 ms was not,
	// nor, once, 2 s with the replica still starting).
	const queueWait = 3 * time.Second
	var runs atomic.Int32
	flaky := handlers.Func(func(ctx context.Context, req *handlers.Request) (handlers.Result, error) {
		if runs.Add(1) == 1 {
			// The retry comes back after the queue wait has passed, however
			// late this first delivery was: the attempt outlasts the wait
			// instead of a retry delay sized for a quiet machine.
			for time.Since(req.Message.CreatedAt) <= queueWait+100*time.Millisecond {
				select {
				case <-ctx.Done():
					return handlers.Result{}, ctx.Err()
				case <-time.After(20 * time.Millisecond):
				}
			}
			return handlers.Result{}, handlers.Retryable(errors.New("overloaded"))
		}
		return handlers.Result{Output: []byte(`"ok"`)}, nil
	})
	pol := fastPolicy(3)
	pol.AttemptTimeout = 30 * time.Second
	pol.QueueWait = queueWait
	pol.Schedule = retry.Fixed{Every: 100 * time.Millisecond} // the retry is a redelivery
	warm := handlers.Func(func(context.Context, *handlers.Request) (handlers.Result, error) {
		return handlers.Result{Output: []byte(`"ok"`)}, nil
	})
	h.start(persona("flaky", flaky, pol), persona("warm", warm, fastPolicy(1)))
	// The replica serves before the clock of the request under test starts.
	outs.wait(t, h.publish("warm", "warm-up").RequestID, 30*time.Second)
	req := h.publish("flaky", "started-in-time")
	rec := outs.wait(t, req.RequestID, 30*time.Second)
	require.Equal(t, schemas.OutcomeSucceeded, rec.Outcome, "%s: %s", rec.Reason, rec.Detail)
	require.EqualValues(t, 2, runs.Load())
}
