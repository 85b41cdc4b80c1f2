package consumers_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/personaq/personaq/consumers"
	"github.com/personaq/personaq/handlers"
	"github.com/personaq/personaq/schemas"
)

// A replica that dies at any step of the quarantine path — the record
// published, its index entry written, the terminal record written, the
// message not yet termed — leaves the request half-ended. Its redelivery
// (after AckWait) must neither run the handler again nor store a second
// quarantine record, and the request ends with exactly one terminal record,
// which names that record. Within the quarantine stream's duplicate window
// (2 min: Nats-Msg-Id dedup still works) and past it (200 ms, well under
// the 1 s AckWait: only the KV index dedups, and after the first step it
// holds just the writer's reservation). A rerun would show: the terminal
// persona succeeds from its second attempt on, the exhausted one fails
// on every attempt.
func TestQuarantineCrashAtEachStep(t *testing.T) {
	t.Parallel()
	steps := []struct {
		name string
		step consumers.QuarantineStep
	}{
		{"Decided", consumers.StepDecided},
		{"RecordPublished", consumers.StepRecordPublished},
		{"RecordIndexed", consumers.StepRecordIndexed},
		{"TerminalRecordStored", consumers.StepConcluded},
	}
	windows := []struct {
		name   string
		window time.Duration
	}{
		{"WithinDuplicateWindow", 0},
		{"PastDuplicateWindow", 200 * time.Millisecond},
	}
	reasons := []struct {
		name        string
		reason      schemas.Reason
		maxAttempts int
		runs        int // handler runs, all before the crash
		fail        func(attempt int) error
	}{
		{"Terminal", schemas.ReasonTerminal, 3, 1, func(attempt int) error {
			if attempt == 1 {
				return handlers.Terminal(errors.New("bad request"))
			}
			return nil
		}},
		{"Exhausted", schemas.ReasonExhausted, 2, 2, func(int) error { return errors.New("flaky") }},
	}
	for _, step := range steps {
		for _, w := range windows {
			for _, rs := range reasons {
				t.Run(step.name+"/"+w.name+"/"+rs.name, func(t *testing.T) {
					t.Parallel()
					h := newHarness(t, true)
					h.topo.DuplicateWindow = w.window
					h.topo = h.topo.WithDefaults()
					out := h.watchOutcomes()
					var runs atomic.Int32
					p := persona("qcrash", handlers.Func(func(_ context.Context, req *handlers.Request) (handlers.Result, error) {
						runs.Add(1)
						return handlers.Result{}, rs.fail(req.Attempt)
					}), fastPolicy(rs.maxAttempts))
					p.AckWait = fenceAckWait
					rep := h.startArmed(func(c *consumers.Config) { c.Topology = h.topo },
						func(rt *consumers.Runtime) { rt.CrashQuarantineAt(step.step) }, p)
					req := h.publish("qcrash", "t-qcrash")

					ev := out.wait(t, req.RequestID, 20*time.Second)
					// At the last step the terminal record is visible just before the
					// crash fires, so wait for it rather than read it once.
					require.Eventually(t, func() bool { return !rep.rt.CrashArmed() }, 10*time.Second, 5*time.Millisecond,
						"the simulated crash happened")
					require.Eventually(t, func() bool { return h.requestsLeft() == 0 }, 10*time.Second, 10*time.Millisecond,
						"the redelivery termed the message")

					require.EqualValues(t, rs.runs, runs.Load(), "the handler did not run again after the crash")
					recs := h.quarantinedFor(req.RequestID)
					require.Len(t, recs, 1, "one quarantine record")
					require.Equal(t, rs.reason, recs[0].Reason)
					require.Equal(t, 1, out.count(), "one terminal record")
					require.Equal(t, schemas.OutcomeQuarantined, ev.Outcome)
					require.Equal(t, rs.reason, ev.Reason)
					require.Equal(t, rs.runs, ev.Attempts)
					require.NotZero(t, ev.QuarantineSeq)
					require.Equal(t, recs[0].ID, h.quarantined(ev.QuarantineSeq).ID, "the terminal record names the one quarantine record")
				})
			}
		}
	}
}
