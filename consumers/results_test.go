package consumers_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"

	"github.com/personaq/personaq/consumers"
	"github.com/personaq/personaq/consumers/ledger"
	"github.com/personaq/personaq/consumers/wire"
	"github.com/personaq/personaq/handlers"
	"github.com/personaq/personaq/integration/testenv"
	"github.com/personaq/personaq/retry"
	"github.com/personaq/personaq/schemas"
)

// startWith runs a replica with cfg (JetStream, ledger, logger and
// personas filled in) until the test ends.
func (h *harness) startWith(cfg consumers.Config, personas ...consumers.Persona) {
	h.t.Helper()
	log := zerolog.New(zerolog.NewTestWriter(h.t)).Level(zerolog.InfoLevel)
	cfg.JetStream, cfg.Personas, cfg.Ledger, cfg.Logger = h.js, personas, h.ledger, &log
	cfg.WithoutLedger = h.ledger == nil
	cfg.DrainTimeout, cfg.FetchMaxWait = 2*time.Second, 200*time.Millisecond
	rt, err := consumers.New(cfg)
	require.NoError(h.t, err)
	// Provisioned before it runs, as start does: a request published while
	// Run was still creating the persona's consumer could be counted as
	// neither pending nor unserved, and requestsLeft read 0 before it ran.
	require.NoError(h.t, rt.Provision(setupCtx(h.t)))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = rt.Run(ctx) }()
	h.t.Cleanup(func() { cancel(); <-done })
}

// recordsOf reads every terminal record stored for requestID.
func (h *harness) recordsOf(requestID string) []*schemas.OutcomeEvent {
	h.t.Helper()
	cons, err := h.js.OrderedConsumer(context.Background(), h.topo.OutcomesStream, jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{h.topo.OutcomeFilter(requestID)},
	})
	require.NoError(h.t, err)
	var out []*schemas.OutcomeEvent
	for {
		m, err := cons.Next(jetstream.FetchMaxWait(300 * time.Millisecond))
		if err != nil {
			require.True(h.t, errors.Is(err, nats.ErrTimeout) || errors.Is(err, jetstream.ErrNoMessages), "read records: %v", err)
			return out
		}
		ev, err := schemas.DecodeOutcome(m.Data())
		require.NoError(h.t, err)
		out = append(out, ev)
	}
}

// quarantinedFor lists the quarantine records of requestID.
func (h *harness) quarantinedFor(requestID string) []*schemas.QuarantineRecord {
	h.t.Helper()
	s, err := h.js.Stream(context.Background(), h.topo.QuarantineStream)
	require.NoError(h.t, err)
	info, err := s.Info(context.Background())
	require.NoError(h.t, err)
	var out []*schemas.QuarantineRecord
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq && info.State.Msgs > 0; seq++ {
		raw, err := s.GetMsg(context.Background(), seq)
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			continue
		}
		require.NoError(h.t, err)
		rec, err := schemas.DecodeQuarantineRecord(raw.Data)
		require.NoError(h.t, err)
		if rec.RequestID == requestID {
			out = append(out, rec)
		}
	}
	return out
}

// countingObserver counts refused settles; panicOnce makes its first
// Outcome call panic (a replica dying between storing the terminal record
// and settling the message).
type countingObserver struct {
	refused   atomic.Int32
	panicOnce atomic.Bool
}

func (o *countingObserver) Attempt(string, retry.Class, time.Duration) {}
func (o *countingObserver) Outcome(string, schemas.Outcome, schemas.Reason) {
	if o.panicOnce.CompareAndSwap(true, false) {
		panic("replica dies after storing the terminal record")
	}
}
func (o *countingObserver) InFlight(string, int)                     {}
func (o *countingObserver) RedeliveryLateness(string, time.Duration) {}
func (o *countingObserver) LedgerCall(string, time.Duration, error)  {}
func (o *countingObserver) SettleRefused(string, schemas.Outcome)    { o.refused.Add(1) }

// Two deliveries of one request settle at the same moment, one succeeded
// and one terminal: one terminal record stands, the other settle is
// refused and counted, and no quarantine record contradicts the record.
func TestOneTerminalRecordWhenTwoDeliveriesRaceToSettle(t *testing.T) {
	t.Parallel()
	h := newHarness(t, false)
	obs := &countingObserver{}
	var started sync.WaitGroup
	started.Add(2)
	var n atomic.Int32
	h.startWith(consumers.Config{Observer: obs}, persona("racer", handlers.Func(
		func(context.Context, *handlers.Request) (handlers.Result, error) {
			first := n.Add(1) == 1
			started.Done()
			started.Wait() // both deliveries run at once
			if first {
				return handlers.Result{Output: []byte(`"done"`)}, nil
			}
			return handlers.Result{}, handlers.Terminal(errors.New("a stale run says no"))
		}), fastPolicy(1)))
	req := h.publish("racer", "t-race")
	// The same request under a second message id (an orchestrator that
	// retried its publish after the duplicate window).
	data, err := schemas.Encode(req)
	require.NoError(t, err)
	msg := nats.NewMsg(h.topo.RequestSubject("racer"))
	msg.Data = data
	msg.Header.Set(jetstream.MsgIDHeader, "second-id")
	_, err = h.js.PublishMsg(context.Background(), msg)
	require.NoError(t, err)

	require.Eventually(t, func() bool { return h.requestsLeft() == 0 }, 10*time.Second, 10*time.Millisecond)
	recs := h.recordsOf(req.RequestID)
	require.Len(t, recs, 1, "one terminal record")
	require.EqualValues(t, 1, obs.refused.Load(), "the losing settle is refused and counted")
	q := h.quarantinedFor(req.RequestID)
	if recs[0].Outcome == schemas.OutcomeSucceeded {
		require.Empty(t, q, "no quarantine record says a succeeded request stopped")
	} else {
		require.Len(t, q, 1)
	}
}

// A replica dies after storing a success and before acking; Redis then
// loses everything. The redelivery is settled from the terminal record:
// the handler does not run again.
func TestRedeliveryAfterRedisWipeIsNotRerun(t *testing.T) {
	t.Parallel()
	h := newHarness(t, false)
	rs := testenv.StartRedis(t)
	rc := rs.Client(t)
	l, err := ledger.New(ledger.Config{Client: rc})
	require.NoError(t, err)
	h.ledger = l
	obs := &countingObserver{}
	obs.panicOnce.Store(true)
	var n atomic.Int32
	h.startWith(consumers.Config{Observer: obs}, persona("once", handlers.Func(
		func(context.Context, *handlers.Request) (handlers.Result, error) {
			if n.Add(1) == 1 {
				// The first run's record is stored, then the replica "dies";
				// wipe Redis before the redelivery.
				go func() {
					require.Eventually(t, func() bool { return !obs.panicOnce.Load() }, 5*time.Second, time.Millisecond)
					require.NoError(t, rc.FlushAll(context.Background()).Err())
				}()
			}
			return handlers.Result{Output: []byte(`{"answer":42}`)}, nil
		}), fastPolicy(3)))
	req := h.publish("once", "t-wipe")
	// Settled once it has run: right after a publish the consumer's pending
	// count can still read 0 (the stream tells its consumers of a new
	// message asynchronously), which ended this wait before any run, 0.5 s
	// in, beside a CPU hog.
	require.Eventually(t, func() bool { return n.Load() > 0 && h.requestsLeft() == 0 }, 20*time.Second, 20*time.Millisecond)
	require.EqualValues(t, 1, n.Load(), "the handler ran once")
	recs := h.recordsOf(req.RequestID)
	require.Len(t, recs, 1)
	require.JSONEq(t, `{"answer":42}`, string(recs[0].Output))
}

// A request for a persona nobody serves is quarantined as unknown_persona
// after the grace period, payload intact; two sweeping replicas store one
// record.
func TestUnknownPersonaIsQuarantinedAfterGrace(t *testing.T) {
	t.Parallel()
	h := newHarness(t, false)
	for range 2 {
		h.startWith(consumers.Config{UnknownPersonaGrace: 300 * time.Millisecond},
			persona("known", handlers.Func(func(context.Context, *handlers.Request) (handlers.Result, error) {
				return handlers.Result{}, nil
			}), fastPolicy(1)))
	}
	req := h.publish("ghost", "t-ghost")
	unserved, err := wire.UnservedRequests(context.Background(), h.js, h.topo)
	require.NoError(t, err)
	require.Len(t, unserved, 1)
	require.Equal(t, "ghost", unserved[0].Persona)

	var rec *schemas.OutcomeEvent
	require.Eventually(t, func() bool {
		rec, err = wire.NewOutcomes(h.js, h.topo).Lookup(context.Background(), req.RequestID)
		return err == nil
	}, 10*time.Second, 20*time.Millisecond)
	require.Equal(t, schemas.ReasonUnknownPersona, rec.Reason)
	q := h.quarantinedFor(req.RequestID)
	require.Len(t, q, 1)
	want, err := schemas.Encode(req)
	require.NoError(t, err)
	require.Equal(t, want, q[0].Payload, "payload kept byte for byte")
	require.Contains(t, q[0].Detail, `no replica serves persona "ghost"`)
	require.Zero(t, h.requestsLeft())
}

// A failed attempt keeps what the persona answered, bounded, in the
// ledger's history (the next attempt sees the invalid answer).
func TestFailedAttemptKeepsAnExcerptOfTheAnswer(t *testing.T) {
	t.Parallel()
	h := newHarness(t, true)
	out := h.watchOutcomes()
	var seen atomic.Value
	h.start(persona("fixer", handlers.Func(func(_ context.Context, req *handlers.Request) (handlers.Result, error) {
		if req.Attempt == 1 {
			return handlers.Result{Output: []byte(`{"summary":`)}, handlers.Validation("answer is not JSON", errors.New("invalid answer"))
		}
		seen.Store(req.Previous[0].Output)
		return handlers.Result{Output: []byte(`{"summary":"ok"}`)}, nil
	}), fastPolicy(3)))
	req := h.publish("fixer", "t-excerpt")
	require.Equal(t, schemas.OutcomeSucceeded, out.wait(t, req.RequestID, 10*time.Second).Outcome)
	require.Equal(t, `{"summary":`, seen.Load())
}
