package consumers_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/personaq/personaq/handlers"
	"github.com/personaq/personaq/retry"
	"github.com/personaq/personaq/schemas"
)

// syncBuffer is a bytes.Buffer safe for the runtime's concurrent writes.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// Adaptive retry through the real runtime: the DEFER line names the task,
// the step and the plateau point; a request that tracks progress and never
// made any (every attempt a network failure, reporting nothing) is
// escalated, not exhausted.
func TestRuntimeLogsAdaptiveRetryDecisions(t *testing.T) {
	t.Parallel()
	h := newHarness(t, true)
	out := h.watchOutcomes()
	var logs syncBuffer
	stuck := persona("dev-story", handlers.Func(func(context.Context, *handlers.Request) (handlers.Result, error) {
		return handlers.Result{Progress: retry.Progress{Completed: 5, Total: 9}}, errors.New("tests failed at task 6")
	}), fastPolicy(5))
	down := persona("down", handlers.Func(func(_ context.Context, req *handlers.Request) (handlers.Result, error) {
		return handlers.Result{}, handlers.Network(fmt.Errorf("connection refused on attempt %d", req.Attempt))
	}), fastPolicy(3))
	h.logTo = &logs
	h.start(stuck, down)
	tracked := func(r *schemas.PersonaRequest) {
		r.Agents, r.ProgressTotal = schemas.Agents{Primary: "claude", Fallback: "codex"}, 9
	}

	deferred := out.wait(t, h.publish("dev-story", "story-9", tracked).RequestID, 15*time.Second)
	require.Equal(t, schemas.OutcomeDeferred, deferred.Outcome)
	require.Equal(t, 4, deferred.Attempts, "attempt 3 continues; the fallback confirms on attempt 4")
	require.Contains(t, logs.String(), `"attempt":4,"agent":"codex","role":"fallback"`)
	require.Contains(t, logs.String(), `"message":"Task story-9 step main deferred - dev-story hit complexity limit at 5/9"`)

	escalated := out.wait(t, h.publish("down", "story-10", tracked).RequestID, 15*time.Second)
	require.Equal(t, schemas.OutcomeEscalated, escalated.Outcome)
	rec := h.quarantined(escalated.QuarantineSeq)
	require.Contains(t, rec.Detail, "zero progress on all 3 attempts (likely API/connection issue); escalated")
	require.Contains(t, logs.String(), `"message":"[RETRY 1] API error: connection refused on attempt 1"`)
	require.Contains(t, logs.String(), `"blocked":false,"message":"[RETRY 3] API error: connection refused on attempt 3 - all retries exhausted; task escalated"`)
}

// negativeSchedule is a custom schedule with a bug: a negative delay.
type negativeSchedule struct{}

func (negativeSchedule) Delay(int) time.Duration { return -time.Second }
func (negativeSchedule) String() string          { return "negative" }

// A schedule's out-of-range delay is replaced by a safe one, and the
// runtime says so: the operator learns the policy is wrong.
func TestRuntimeLogsACorrectedDelay(t *testing.T) {
	t.Parallel()
	h := newHarness(t, true)
	var logs syncBuffer
	pol := fastPolicy(2)
	pol.Schedule = negativeSchedule{}
	h.logTo = &logs
	h.start(persona("buggy", handlers.Func(func(context.Context, *handlers.Request) (handlers.Result, error) {
		return handlers.Result{}, errors.New("try again")
	}), pol))
	h.publish("buggy", "task-buggy")
	require.Eventually(t, func() bool {
		return strings.Contains(logs.String(), `"warning":`) && strings.Contains(logs.String(), "retry policy corrected")
	}, 10*time.Second, 10*time.Millisecond, "no warning logged")
}
