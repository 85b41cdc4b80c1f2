package consumers_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/personaq/personaq/consumers/ledger"
	"github.com/personaq/personaq/consumers/wire"
	"github.com/personaq/personaq/handlers"
	"github.com/personaq/personaq/integration/testenv"
	"github.com/personaq/personaq/retry"
	"github.com/personaq/personaq/schemas"
)

// outageHarness is a harness whose ledger is a real redis-server the test
// stops, through a client that gives up on a dead server in milliseconds.
func outageHarness(t *testing.T) (*harness, *testenv.Redis) {
	t.Helper()
	h := newHarness(t, false)
	rs := testenv.StartRedis(t)
	// go-redis's pool keeps a dialer retrying a dead server every second;
	// it notices the client was closed (below, run first) at its next try.
	t.Cleanup(func() {
		require.Eventually(t, func() bool {
			buf := make([]byte, 1<<20)
			return !bytes.Contains(buf[:runtime.Stack(buf, true)], []byte("pool.(*ConnPool).tryDial"))
		}, 5*time.Second, 50*time.Millisecond, "go-redis's dialer stopped")
	})
	l := h.useLedger(redis.NewClient(&redis.Options{Addr: rs.Addr, DialTimeout: 200 * time.Millisecond,
		ReadTimeout: 200 * time.Millisecond, WriteTimeout: 200 * time.Millisecond, MaxRetries: -1}))
	_, err := l.Epoch(context.Background())
	require.NoError(t, err)
	return h, rs
}

// useLedger makes client's ledger the harness's (and closes client at the
// test's end).
func (h *harness) useLedger(client *redis.Client) *ledger.Ledger {
	h.t.Helper()
	h.t.Cleanup(func() { _ = client.Close() })
	l, err := ledger.New(ledger.Config{Client: client})
	require.NoError(h.t, err)
	h.ledger = l
	return l
}

// attemptEvents collects the attempt events of every request.
type attemptEvents struct {
	mu  sync.Mutex
	all []*schemas.AttemptEvent
}

func (h *harness) watchAttempts() *attemptEvents {
	h.t.Helper()
	a := &attemptEvents{}
	sub, err := h.nats.Conn(h.t).Subscribe(h.topo.AttemptsPrefix+".>", func(m *nats.Msg) {
		if ev, err := schemas.DecodeAttemptEvent(m.Data); err == nil {
			a.mu.Lock()
			a.all = append(a.all, ev)
			a.mu.Unlock()
		}
	})
	require.NoError(h.t, err)
	h.t.Cleanup(func() { _ = sub.Unsubscribe() })
	return a
}

func (a *attemptEvents) waitingFor(requestID string) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	n := 0
	for _, ev := range a.all {
		if ev.RequestID == requestID && ev.Kind == schemas.AttemptWaiting && ev.WaitingFor == schemas.WaitingForLedger {
			n++
		}
	}
	return n
}

// A ledger outage longer than MaxDeliver deliveries would last if every
// delivery were released (MaxDeliver 3: released after 1 s and 2 s, the
// third delivery was the last) stops the pull instead: nothing is
// released, redelivered or quarantined because of it, the held requests
// tell their callers why they wait, and every request runs once, as
// attempt 1, when Redis is back (a new, empty server: the ledger was
// lost too).
func TestLedgerOutageStopsThePull(t *testing.T) {
	t.Parallel()
	h, rs := outageHarness(t)
	out := h.watchOutcomes()
	events := h.watchAttempts()
	var c calls
	p := persona("steady", handlers.Func(func(_ context.Context, req *handlers.Request) (handlers.Result, error) {
		c.add(req, "r1")
		return handlers.Result{}, nil
	}), fastPolicy(2))
	p.Concurrency, p.MaxDeliver, p.AckWait = 2, 3, time.Second
	r := h.start(p)
	require.Eventually(t, func() bool { return r.rt.Ready() == nil }, 10*time.Second, 20*time.Millisecond)

	rs.Stop()
	reqs := make([]*schemas.PersonaRequest, 5)
	for i := range reqs {
		reqs[i] = h.publish("steady", "t-down")
	}
	require.Eventually(t, func() bool { return errors.Is(r.rt.Ready(), ledger.ErrUnavailable) }, 10*time.Second, 20*time.Millisecond)
	require.Eventually(t, func() bool { return events.waitingFor(reqs[0].RequestID) > 0 }, 10*time.Second, 20*time.Millisecond,
		"a caller waiting on a held request is told it waits for the ledger")
	time.Sleep(10 * time.Second) // AckWait 1 s: held deliveries are heartbeated throughout

	cons, err := h.js.Consumer(context.Background(), h.topo.RequestsStream, wire.Durable("steady"))
	require.NoError(t, err)
	info, err := cons.Info(context.Background())
	require.NoError(t, err)
	require.Zero(t, info.NumRedelivered, "no delivery released or redelivered during the outage")
	require.LessOrEqual(t, info.NumAckPending, p.Concurrency, "no more pulled than the slots held before the outage was known")
	require.EqualValues(t, len(reqs), h.requestsLeft(), "every request kept")
	require.Zero(t, h.quarantinedCount(), "nothing quarantined because of the outage")
	require.Empty(t, c.forTask("t-down"), "no attempt runs without the ledger")

	rs.Restart(t)
	for _, req := range reqs {
		ev := out.wait(t, req.RequestID, 30*time.Second)
		require.Equal(t, schemas.OutcomeSucceeded, ev.Outcome)
		require.Equal(t, 1, ev.Attempts, "the outage burned no attempt")
	}
	require.Len(t, c.forTask("t-down"), len(reqs), "each ran once")
	require.Zero(t, h.quarantinedCount())
	require.NoError(t, r.rt.Ready())
}

// A step deadline that passes while a request waits for the ledger ends
// it with deadline_exceeded, unrun, and the record says the ledger was
// down: the caller is not left to guess.
func TestStepDeadlineDuringLedgerOutageSaysSo(t *testing.T) {
	t.Parallel()
	h, rs := outageHarness(t)
	out := h.watchOutcomes()
	var c calls
	p := persona("steady", handlers.Func(func(_ context.Context, req *handlers.Request) (handlers.Result, error) {
		c.add(req, "r1")
		return handlers.Result{}, nil
	}), fastPolicy(2))
	p.AckWait = time.Second
	r := h.start(p)
	require.Eventually(t, func() bool { return r.rt.Ready() == nil }, 10*time.Second, 20*time.Millisecond)

	rs.Stop()
	req := schemas.NewRequest("t-late", "main", "steady")
	_, err := wire.PublishRequest(context.Background(), h.js, h.topo, req, wire.WithDeadline(time.Now().Add(3*time.Second)))
	require.NoError(t, err)
	ev := out.wait(t, req.RequestID, 15*time.Second)
	require.Equal(t, schemas.OutcomeDeadlineExceeded, ev.Outcome)
	require.Contains(t, ev.Detail, "attempt ledger (Redis) was unreachable")
	require.Empty(t, c.forTask("t-late"))
}

// quarantinedCount is how many records the quarantine stream holds.
func (h *harness) quarantinedCount() uint64 {
	h.t.Helper()
	s, err := h.js.Stream(context.Background(), h.topo.QuarantineStream)
	require.NoError(h.t, err)
	info, err := s.Info(context.Background())
	require.NoError(h.t, err)
	return info.State.Msgs
}

// A request published once the pull has stopped for the outage is not
// delivered, yet its caller is told it waits for the ledger, and its step
// deadline ends it (deadline_exceeded, saying so) with one quarantine and
// one terminal record; when Redis is back its message is termed unrun.
func TestRequestPublishedDuringLedgerOutageIsToldAndEnded(t *testing.T) {
	t.Parallel()
	h, rs := outageHarness(t)
	out := h.watchOutcomes()
	events := h.watchAttempts()
	var c calls
	p := persona("steady", handlers.Func(func(_ context.Context, req *handlers.Request) (handlers.Result, error) {
		c.add(req, "r1")
		return handlers.Result{}, nil
	}), fastPolicy(2))
	p.AckWait = time.Second
	r := h.start(p)
	require.Eventually(t, func() bool { return r.rt.Ready() == nil }, 10*time.Second, 20*time.Millisecond)

	rs.Stop()
	cons, err := h.js.Consumer(context.Background(), h.topo.RequestsStream, wire.Durable("steady"))
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		info, err := cons.Info(context.Background())
		// The pull has stopped: no pull request is left waiting on the server.
		return errors.Is(r.rt.Ready(), ledger.ErrUnavailable) && err == nil && info.NumWaiting == 0
	}, 10*time.Second, 20*time.Millisecond)
	late := schemas.NewRequest("t-late", "main", "steady")
	_, err = wire.PublishRequest(context.Background(), h.js, h.topo, late, wire.WithDeadline(time.Now().Add(5*time.Second)))
	require.NoError(t, err)
	patient := h.publish("steady", "t-patient") // no deadline: runs after the outage

	require.Eventually(t, func() bool {
		return events.waitingFor(late.RequestID) == 1 && events.waitingFor(patient.RequestID) == 1
	},
		10*time.Second, 20*time.Millisecond, "each caller is told once, though nothing was delivered")
	ev := out.wait(t, late.RequestID, 15*time.Second)
	require.Equal(t, schemas.OutcomeDeadlineExceeded, ev.Outcome)
	require.Contains(t, ev.Detail, "attempt ledger (Redis) was unreachable")
	require.Equal(t, late.RequestID, h.quarantined(ev.QuarantineSeq).RequestID)

	info, err := cons.Info(context.Background())
	require.NoError(t, err)
	require.Zero(t, info.Delivered.Consumer, "nothing was delivered during the outage")

	rs.Restart(t)
	require.Equal(t, schemas.OutcomeSucceeded, out.wait(t, patient.RequestID, 30*time.Second).Outcome)
	require.Eventually(t, func() bool { return h.requestsLeft() == 0 }, 15*time.Second, 20*time.Millisecond, "the ended request's message is termed")
	require.Len(t, c.forTask("t-late"), 0, "the ended request never ran")
	require.Len(t, h.quarantinedFor(late.RequestID), 1, "one quarantine record")
	require.Equal(t, 2, out.count(), "one terminal record each")
}

// replyLoser is a go-redis hook that lets one script call of a task run in
// Redis and then loses its reply, as a Redis shutdown between running a
// command and writing its reply does.
type replyLoser struct {
	task string // the call whose first key names this task loses its reply
	done atomic.Bool
}

func (h *replyLoser) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *replyLoser) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		return h.ProcessPipelineHook(func(ctx context.Context, cmds []redis.Cmder) error {
			return next(ctx, cmds[0])
		})(ctx, []redis.Cmder{cmd})
	}
}

func (h *replyLoser) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		err := next(ctx, cmds)
		if err != nil || !h.names(cmds) || !h.done.CompareAndSwap(false, true) {
			return err
		}
		for _, c := range cmds {
			c.SetErr(io.ErrUnexpectedEOF)
		}
		return io.ErrUnexpectedEOF
	}
}

func (h *replyLoser) names(cmds []redis.Cmder) bool {
	for _, c := range cmds {
		args := c.Args()
		if len(args) > 3 && (c.Name() == "evalsha" || c.Name() == "eval") {
			if k, _ := args[3].(string); strings.Contains(k, "{"+h.task+"}") {
				return true
			}
		}
	}
	return false
}

// A Begin that ran in Redis but whose reply was lost opened attempt 1 in
// the ledger; the delivery, held, asks again and takes that attempt over:
// the request runs once, as attempt 1, and no attempt is recorded as lost.
func TestBeginWhoseReplyWasLostIsNotALostAttempt(t *testing.T) {
	t.Parallel()
	h := newHarness(t, false)
	rs := testenv.StartRedis(t)
	var logs syncBuffer
	h.logTo = &logs
	loser := &replyLoser{task: "t-reply-lost"}
	client := redis.NewClient(&redis.Options{Addr: rs.Addr})
	client.AddHook(loser)
	l := h.useLedger(client)
	out := h.watchOutcomes()
	var c calls
	p := persona("steady", handlers.Func(func(_ context.Context, req *handlers.Request) (handlers.Result, error) {
		c.add(req, "r1")
		return handlers.Result{}, nil
	}), fastPolicy(3))
	p.AckWait = 2 * time.Second
	h.start(p)

	req := h.publish("steady", "t-reply-lost")
	ev := out.wait(t, req.RequestID, 15*time.Second)
	require.True(t, loser.done.Load(), "the Begin's reply was lost")
	require.Equal(t, 1, strings.Count(logs.String(), "its attempt, which never ran, is resumed"), "said once in the log")
	require.Equal(t, schemas.OutcomeSucceeded, ev.Outcome)
	require.Equal(t, 1, ev.Attempts, "the attempt whose Begin lost its reply never ran")
	require.Len(t, c.forTask("t-reply-lost"), 1)
	hist, st, err := l.History(context.Background(), ledger.StepKey{TaskID: req.TaskID, Step: req.Step + "@" + req.RequestID})
	require.NoError(t, err)
	require.True(t, st.Done)
	require.Equal(t, 1, st.Attempts, "one attempt recorded: none lost")
	require.Len(t, hist, 1)
	require.Equal(t, retry.ClassSucceeded, hist[0].Class)
}
