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
			busy := h.publish("planner", "busy")
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
			require.Equal(t, schemas.OutcomeSucceeded, outs.wait(t, busy.RequestID, time.Second).Outcome,
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
	var runs atomic.Int32
	flaky := handlers.Func(func(context.Context, *handlers.Request) (handlers.Result, error) {
		if runs.Add(1) == 1 {
			return handlers.Result{}, handlers.Retryable(errors.New("overloaded"))
		}
		return handlers.Result{Output: []byte(`"ok"`)}, nil
	})
	pol := fastPolicy(3)
	// Long enough for a first delivery on a loaded machine (200 ms was not),
	// well short of the retry's delay.
	pol.QueueWait = 2 * time.Second
	pol.Schedule = retry.Fixed{Every: 6 * time.Second} // a NakWithDelay: the retry is a redelivery
	h.start(persona("flaky", flaky, pol))
	req := h.publish("flaky", "started-in-time")
	rec := outs.wait(t, req.RequestID, 15*time.Second)
	require.Equal(t, schemas.OutcomeSucceeded, rec.Outcome)
	require.EqualValues(t, 2, runs.Load())
}
