package consumers_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/personaq/personaq/consumers/ledger"
	"github.com/personaq/personaq/consumers/wire"
	"github.com/personaq/personaq/dlq"
	"github.com/personaq/personaq/handlers"
	"github.com/personaq/personaq/integration/testenv"
	"github.com/personaq/personaq/retry"
	"github.com/personaq/personaq/schemas"
)

// Adaptive retry's example through the real runtime: odd attempts primary, even
// attempts fallback; 5/9, 4/9, 5/9, 5/9 → deferred at attempt 4 with the
// plateau point in the record.
func TestRuntimePlateauAcrossAgentsDefers(t *testing.T) {
	t.Parallel()
	h := newHarness(t, true)
	out := h.watchOutcomes()
	var c calls
	progress := []int{5, 4, 5, 5, 5}
	p := persona("dev-story", handlers.Func(func(_ context.Context, req *handlers.Request) (handlers.Result, error) {
		c.add(req, "r1")
		done := progress[req.Attempt-1]
		return handlers.Result{Progress: retry.Progress{Completed: done, Total: 9}},
			fmt.Errorf("tests failed at task %d", done+1)
	}), fastPolicy(5))
	h.start(p)

	req := h.publish("dev-story", "story-7", func(r *schemas.PersonaRequest) {
		r.Agents = schemas.Agents{Primary: "claude", Fallback: "codex"}
		r.ProgressTotal = 9
	})
	ev := out.wait(t, req.RequestID, 15*time.Second)
	require.Equal(t, schemas.OutcomeDeferred, ev.Outcome)
	require.Equal(t, 4, ev.Attempts)
	got := c.forTask("story-7")
	require.Len(t, got, 4)
	for i, want := range []string{"claude", "codex", "claude", "codex"} {
		require.Equal(t, want, got[i].agent, "attempt %d", i+1)
	}
	rec := h.quarantined(ev.QuarantineSeq)
	require.Equal(t, schemas.ReasonDeferred, rec.Reason)
	require.Contains(t, rec.Detail, "5/9")
	require.Len(t, rec.Errors, 4)
}

// Retry with feedback: a validation failure is retried at once with the error fed
// back; the handler sees it on the next attempt.
func TestRuntimeValidationFeedbackReachesNextAttempt(t *testing.T) {
	t.Parallel()
	h := newHarness(t, true)
	out := h.watchOutcomes()
	var c calls
	h.start(persona("coder", handlers.Func(func(_ context.Context, req *handlers.Request) (handlers.Result, error) {
		c.add(req, "r1")
		if len(req.Feedback) == 0 {
			return handlers.Result{}, handlers.Validation("SyntaxError: line 3", errors.New("invalid code"))
		}
		return handlers.Result{}, nil
	}), fastPolicy(3)))
	req := h.publish("coder", "t-fb")
	ev := out.wait(t, req.RequestID, 10*time.Second)
	require.Equal(t, schemas.OutcomeSucceeded, ev.Outcome)
	got := c.forTask("t-fb")
	require.Len(t, got, 2)
	require.Contains(t, got[1].feedback[0], "SyntaxError: line 3")
}

// A redelivery of a step that already succeeded (crash between the side
// effect and the ack) is acked without running the handler again.
func TestRuntimeSkipsDuplicateOfCompletedStep(t *testing.T) {
	t.Parallel()
	h := newHarness(t, true)
	out := h.watchOutcomes()
	var n atomic.Int32
	h.start(persona("once", handlers.Func(func(context.Context, *handlers.Request) (handlers.Result, error) {
		n.Add(1)
		return handlers.Result{}, nil
	}), fastPolicy(3)))
	req := h.publish("once", "t-dup")
	out.wait(t, req.RequestID, 10*time.Second)

	// The same request again under another message id: what a redelivery
	// after a lost ack looks like to the ledger.
	data, err := schemas.Encode(req)
	require.NoError(t, err)
	msg := nats.NewMsg("personaq.requests.once")
	msg.Data = data
	msg.Header.Set(jetstream.MsgIDHeader, "other-id")
	_, err = h.js.PublishMsg(context.Background(), msg)
	require.NoError(t, err)
	require.Eventually(t, func() bool { return h.requestsLeft() == 0 }, 10*time.Second, 10*time.Millisecond)
	require.EqualValues(t, 1, n.Load(), "handler ran once")
	s, err := h.js.Stream(context.Background(), h.topo.OutcomesStream)
	require.NoError(t, err)
	info, err := s.Info(context.Background())
	require.NoError(t, err)
	require.EqualValues(t, 1, info.State.Msgs, "the duplicate's outcome republish was deduplicated")
}

// A redelivery of a message whose quarantine record is already stored (the
// replica died before terming it) is termed without running the handler.
func TestRuntimeDoesNotRerunAMessageAlreadyQuarantined(t *testing.T) {
	t.Parallel()
	h := newHarness(t, true)
	out := h.watchOutcomes()
	req := h.publish("again", "t-requar")
	// A first delivery that "crashed" after storing the record: take the
	// message, store its record, nak it.
	c, err := h.js.CreateOrUpdateConsumer(context.Background(), h.topo.RequestsStream, jetstream.ConsumerConfig{
		Durable: wire.Durable("again"), FilterSubject: "personaq.requests.again",
		AckPolicy: jetstream.AckExplicitPolicy, AckWait: 5 * time.Second, MaxAckPending: 8})
	require.NoError(t, err)
	m, err := c.Next(jetstream.FetchMaxWait(2 * time.Second))
	require.NoError(t, err)
	md, err := m.Metadata()
	require.NoError(t, err)
	w := dlq.NewWriter(h.js, h.topo.QuarantineSubject)
	_, _, err = w.Put(context.Background(), &schemas.QuarantineRecord{
		SchemaVersion: schemas.Version, ID: dlq.RecordID(md.Stream, md.Sequence.Stream), Reason: schemas.ReasonTerminal,
		Detail: "terminal error: stored before the crash", OriginalSubject: m.Subject(), Payload: m.Data(),
		Persona: "again", RequestID: req.RequestID, TaskID: req.TaskID, Attempts: 1, QuarantinedAt: time.Now().UTC(),
	})
	require.NoError(t, err)
	require.NoError(t, m.Nak())

	var n atomic.Int32
	h.start(persona("again", handlers.Func(func(context.Context, *handlers.Request) (handlers.Result, error) {
		n.Add(1)
		return handlers.Result{}, nil
	}), fastPolicy(3)))
	ev := out.wait(t, req.RequestID, 10*time.Second)
	require.Equal(t, schemas.OutcomeQuarantined, ev.Outcome)
	require.Equal(t, schemas.ReasonTerminal, ev.Reason)
	require.Zero(t, n.Load(), "the handler did not run again")
	require.Eventually(t, func() bool { return h.requestsLeft() == 0 }, 5*time.Second, 10*time.Millisecond)
}

// Redis down: nothing is lost, no attempt is burned, the replica says it is
// not ready; when Redis is back the request runs as attempt 1.
func TestRuntimeRedisOutageBurnsNoAttempt(t *testing.T) {
	t.Parallel()
	h := newHarness(t, false)
	rs := testenv.StartRedis(t)
	h.useLedger(redis.NewClient(&redis.Options{Addr: rs.Addr, DialTimeout: 200 * time.Millisecond,
		ReadTimeout: 200 * time.Millisecond, WriteTimeout: 200 * time.Millisecond, MaxRetries: -1}))
	out := h.watchOutcomes()
	var c calls
	r := h.start(persona("steady", handlers.Func(func(_ context.Context, req *handlers.Request) (handlers.Result, error) {
		c.add(req, "r1")
		return handlers.Result{}, nil
	}), fastPolicy(2)))

	require.Eventually(t, func() bool { return r.rt.Ready() == nil }, 10*time.Second, 20*time.Millisecond, "ready once bound")
	// An outage in which Redis keeps its data (a hung server, a partition);
	// one that loses it is a wipe: see TestRedeliveryAfterRedisWipeIsNotRerun.
	rs.Freeze(t)
	t.Cleanup(func() { rs.Thaw(t) })
	req := h.publish("steady", "t-outage")
	require.Eventually(t, func() bool { return errors.Is(r.rt.Ready(), ledger.ErrUnavailable) }, 10*time.Second, 20*time.Millisecond, "not ready while Redis is down")
	require.Empty(t, c.forTask("t-outage"), "no attempt runs without the ledger")
	require.EqualValues(t, 1, h.requestsLeft(), "the request is kept")

	rs.Thaw(t)
	ev := out.wait(t, req.RequestID, 30*time.Second)
	require.Equal(t, schemas.OutcomeSucceeded, ev.Outcome)
	require.Equal(t, 1, ev.Attempts, "the outage burned no attempt")
	require.NoError(t, r.rt.Ready())
}
