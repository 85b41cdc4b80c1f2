package consumers_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/personaq/personaq/consumers/wire"
	"github.com/personaq/personaq/schemas"
)

// recordsFor counts the terminal records published for request id.
func (o *outcomes) recordsFor(id string) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	n := 0
	for _, ev := range o.all {
		if ev.RequestID == id {
			n++
		}
	}
	return n
}

// pausePersona pauses persona's consumer on the server, as an open circuit
// or `personaq persona pause` does: nothing of it is delivered.
func (h *harness) pausePersona(persona string) {
	h.t.Helper()
	_, err := h.js.PauseConsumer(context.Background(), h.topo.RequestsStream, wire.Durable(persona), time.Now().Add(time.Hour))
	require.NoError(h.t, err)
}

// unhurried is a per-request queue wait a loaded machine cannot overrun,
// for the requests a test needs to run: the persona's 1 s wait ended them
// unrun beside a CPU hog ("the handler did not start", "no waiting request
// ran").
func unhurried(r *schemas.PersonaRequest) {
	r.PolicyOverrides = &schemas.PolicyOverrides{QueueWaitMs: time.Minute.Milliseconds()}
}

// scanLate bounds how long after its queue wait passed the scan ends a
// waiting request: a pass every second on a quiet machine, several on a
// loaded one. A request no scan ends never ends at all here.
const scanLate = 10 * time.Second

// requireQueueWaitEnded checks rec is a queue-wait ending of an unrun request.
func requireQueueWaitEnded(t *testing.T, rec *schemas.OutcomeEvent) {
	t.Helper()
	require.Equal(t, schemas.OutcomeDeadlineExceeded, rec.Outcome)
	require.Equal(t, schemas.ReasonQueueWaitExceeded, rec.Reason)
	require.Zero(t, rec.Attempts)
	require.Contains(t, rec.Detail, "queue wait of 1s")
}

// A request waiting behind a busy worker slot (never delivered: a replica
// pulls no more than its free slots) ends when its queue wait passes, while
// the request ahead of it still runs; it never starts.
func TestQueueWaitEndsRequestBehindBusySlots(t *testing.T) {
	t.Parallel()
	h := newHarness(t, true)
	outs := h.watchOutcomes()
	b := newBlocking()
	pol := fastPolicy(3)
	pol.AttemptTimeout = time.Minute
	pol.QueueWait = time.Second
	p := persona("planner", b, pol)
	p.Concurrency = 1
	h.start(p)
	busy := h.publish("planner", "busy", unhurried)
	waitStarted(t, b)
	late := h.publish("planner", "behind-a-busy-slot")
	rec := outs.wait(t, late.RequestID, pol.QueueWait+scanLate)
	requireQueueWaitEnded(t, rec)
	t.Logf("ended %s after its queue wait passed", rec.At.Sub(late.CreatedAt.Add(pol.QueueWait)))
	require.EqualValues(t, 1, b.runs.Load(), "the request ahead still runs; the late one never started")
	require.Zero(t, outs.recordsFor(busy.RequestID), "the running request is not ended")
	close(b.release)
	require.Equal(t, schemas.OutcomeSucceeded, outs.wait(t, busy.RequestID, 10*time.Second).Outcome)
	require.Eventually(t, func() bool { return h.requestsLeft() == 0 }, 10*time.Second, 20*time.Millisecond,
		"the ended request's message is settled by its record once delivered")
	require.EqualValues(t, 1, b.runs.Load(), "the late request never ran")
	require.Equal(t, 1, outs.recordsFor(late.RequestID))
	require.Equal(t, 2, outs.count())
	require.Zero(t, h.quarantineCount())
}

// A request waiting behind a paused consumer (an open circuit, `persona
// pause`: nothing is delivered) ends when its queue wait passes, per
// persona and per request, with one record even when two replicas scan.
func TestQueueWaitEndsRequestBehindPausedConsumer(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		replicas int
		persona  time.Duration
	}{{"PerPersona", 1, time.Second}, {"PerRequestSeenBefore", 1, 0}, {"TwoReplicas", 2, time.Second}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, true)
			outs := h.watchOutcomes()
			b := newBlocking()
			close(b.release)
			pol := fastPolicy(3)
			pol.QueueWait = tc.persona
			override := func(r *schemas.PersonaRequest) {
				r.PolicyOverrides = &schemas.PolicyOverrides{QueueWaitMs: time.Second.Milliseconds()}
			}
			for range tc.replicas {
				h.start(persona("planner", b, pol))
			}
			// A request that runs under a queue wait tells the replica to scan.
			ran := outs.wait(t, h.publish("planner", "ran", unhurried).RequestID, 10*time.Second)
			require.Equal(t, schemas.OutcomeSucceeded, ran.Outcome, "%s: %s", ran.Reason, ran.Detail)
			h.pausePersona("planner")
			var reqs []*schemas.PersonaRequest
			for range 3 {
				reqs = append(reqs, h.publish("planner", "behind-a-paused-consumer", override))
			}
			for _, req := range reqs {
				requireQueueWaitEnded(t, outs.wait(t, req.RequestID, time.Second+scanLate))
			}
			time.Sleep(2 * time.Second) // more scan passes, by every replica
			for _, req := range reqs {
				require.Equal(t, 1, outs.recordsFor(req.RequestID), "one terminal record for %s", req.RequestID)
			}
			require.EqualValues(t, 1, b.runs.Load(), "no waiting request ran")
			require.Equal(t, 1+len(reqs), outs.count())
			require.Zero(t, h.quarantineCount())
		})
	}
}

// A pass reads a bounded number of requests (1000 per persona); those it
// already ended do not count against the bound, so a paused persona's
// requests beyond the first thousand end too.
func TestQueueWaitScanReachesPastItsBound(t *testing.T) {
	t.Parallel()
	h := newHarness(t, true)
	outs := h.watchOutcomes()
	b := newBlocking()
	pol := fastPolicy(3)
	pol.QueueWait = time.Second
	h.start(persona("planner", b, pol))
	h.pausePersona("planner")
	const n = 1010
	var last *schemas.PersonaRequest
	for range n {
		last = h.publish("planner", "many-behind-a-paused-consumer")
	}
	// Ending 1010 requests took over 30 s under -race beside a CPU hog; a
	// scan that stopped at its bound would never end the last one.
	requireQueueWaitEnded(t, outs.wait(t, last.RequestID, 2*time.Minute))
	require.Eventually(t, func() bool { return outs.count() == n }, time.Minute, 50*time.Millisecond)
	require.Zero(t, b.runs.Load())
}
