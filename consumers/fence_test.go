package consumers_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/personaq/personaq/consumers"
	"github.com/personaq/personaq/consumers/ledger"
	"github.com/personaq/personaq/consumers/transport"
	"github.com/personaq/personaq/consumers/wire"
	"github.com/personaq/personaq/handlers"
	"github.com/personaq/personaq/integration/testenv"
	"github.com/personaq/personaq/schemas"
)

// fenceObserver counts stale settles refused, by op.
type fenceObserver struct {
	countingObserver
	mu    sync.Mutex
	stale map[string]int
}

func (o *fenceObserver) StaleSettle(_, op string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.stale == nil {
		o.stale = map[string]int{}
	}
	o.stale[op]++
}

func (o *fenceObserver) staleTotal() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	n := 0
	for _, v := range o.stale {
		n += v
	}
	return n
}

// runLog records every handler run with its start and end, so a test can
// check that no two runs of one request overlap in time.
type runLog struct {
	mu   sync.Mutex
	runs []run
}

type run struct {
	replica    string
	attempt    int
	start, end time.Time
}

func (l *runLog) begin(replica string, attempt int) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.runs = append(l.runs, run{replica: replica, attempt: attempt, start: time.Now()})
	return len(l.runs) - 1
}

func (l *runLog) end(i int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.runs[i].end = time.Now()
}

func (l *runLog) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.runs)
}

// overlaps returns pairs of runs that were in flight at the same time.
func (l *runLog) overlaps() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for i, a := range l.runs {
		for _, b := range l.runs[i+1:] {
			aEnd, bEnd := a.end, b.end
			if aEnd.IsZero() {
				aEnd = time.Now()
			}
			if bEnd.IsZero() {
				bEnd = time.Now()
			}
			if a.start.Before(bEnd) && b.start.Before(aEnd) {
				out = append(out, fmt.Sprintf("%s#%d overlaps %s#%d", a.replica, a.attempt, b.replica, b.attempt))
			}
		}
	}
	return out
}

const fenceAckWait = time.Second

// A replica frozen past AckWait (heartbeats and lease renewals suppressed
// while its handler runs on) wakes to find another replica running the
// request's next attempt: whatever its handler returns — success, a
// retryable failure, a terminal failure, with 2 or 3 attempts allowed —
// it acks, naks, terms and records nothing. The live attempt ends the
// request: one terminal record, and no third run while it works. (The
// frozen run itself overlaps the live one here because its handler is made
// to ignore the cancellation it gets on waking; a real frozen process runs
// nothing, and on waking cancels its attempt.)
func TestFrozenReplicaSettlesNothingWhenItWakes(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name        string
		maxAttempts int
		stale       error // what the frozen replica's handler returns
	}{
		{"Success", 3, nil},
		{"FailOnce", 3, errors.New("flaky")},
		{"TerminalOnce", 3, handlers.Terminal(errors.New("bad request"))},
		{"MaxTwoAttempts", 2, errors.New("flaky")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, true)
			out := h.watchOutcomes()
			var runs runLog
			aStarted, aRelease := make(chan struct{}), make(chan struct{})
			bStarted, bRelease := make(chan struct{}, 4), make(chan struct{})
			personaFor := func(name string, body func(req *handlers.Request) error) consumers.Persona {
				p := persona("frozen", handlers.Func(func(_ context.Context, req *handlers.Request) (handlers.Result, error) {
					i := runs.begin(name, req.Attempt)
					defer runs.end(i)
					return handlers.Result{}, body(req)
				}), fastPolicy(tc.maxAttempts))
				p.AckWait = fenceAckWait
				return p
			}
			obsA := &fenceObserver{}
			var once sync.Once
			a := h.startMod(func(c *consumers.Config) { c.Observer = obsA }, personaFor("A", func(*handlers.Request) error {
				once.Do(func() { close(aStarted) })
				<-aRelease // a frozen process: its handler ignores the cancellation
				return tc.stale
			}))
			req := h.publish("frozen", "t-frozen")
			<-aStarted
			a.rt.Freeze(true)
			h.start(personaFor("B", func(*handlers.Request) error {
				bStarted <- struct{}{}
				<-bRelease
				return nil
			}))
			select {
			case <-bStarted:
			case <-time.After(15 * time.Second):
				t.Fatal("the frozen replica's request was not redelivered")
			}
			a.rt.Freeze(false)
			close(aRelease)
			require.Eventually(t, func() bool { return obsA.staleTotal() > 0 || runs.count() > 2 }, 10*time.Second, 10*time.Millisecond,
				"the woken replica's settle is refused")
			require.Equal(t, 2, runs.count(), "the woken replica's settle started no other run")
			require.Zero(t, out.count(), "the woken replica wrote no terminal record")
			require.Empty(t, h.quarantinedFor(req.RequestID), "the woken replica wrote no quarantine record")

			close(bRelease)
			ev := out.wait(t, req.RequestID, 15*time.Second)
			require.Equal(t, schemas.OutcomeSucceeded, ev.Outcome)
			require.Equal(t, 2, ev.Attempts, "the frozen attempt counts as lost, the live one is attempt 2")
			require.Eventually(t, func() bool { return h.requestsLeft() == 0 }, 10*time.Second, 10*time.Millisecond)
			require.Equal(t, 1, out.count(), "one terminal record")
			require.Equal(t, 2, runs.count())
		})
	}
}

// The same request published twice under different Nats-Msg-Ids (what a
// watermill Publisher does) while its first delivery runs: the second
// delivery finds the live lease, is released uncounted, and is settled by
// the terminal record once the first ends. The handler runs once.
func TestSameRequestUnderTwoMessageIDsDoesNotRunTwiceAtOnce(t *testing.T) {
	t.Parallel()
	h := newHarness(t, true)
	out := h.watchOutcomes()
	var runs runLog
	started, release := make(chan struct{}, 4), make(chan struct{})
	p := persona("twice", handlers.Func(func(_ context.Context, req *handlers.Request) (handlers.Result, error) {
		i := runs.begin("r", req.Attempt)
		defer runs.end(i)
		started <- struct{}{}
		<-release
		return handlers.Result{}, nil
	}), fastPolicy(3))
	p.AckWait = fenceAckWait
	h.start(p)
	h.start(p) // a second replica, so the second message is not queued behind a busy slot
	req := h.publish("twice", "t-twice")
	<-started

	data, err := schemas.Encode(req)
	require.NoError(t, err)
	msg := nats.NewMsg(h.topo.RequestSubject("twice"))
	msg.Data = data
	msg.Header.Set(jetstream.MsgIDHeader, "another-id")
	_, err = h.js.PublishMsg(context.Background(), msg)
	require.NoError(t, err)

	// Wait until the second message was delivered, found the lease held and
	// was given back (a redelivery pending): it did not run meanwhile.
	cons, err := h.js.Consumer(context.Background(), h.topo.RequestsStream, wire.Durable("twice"))
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		info, err := cons.Info(context.Background())
		return err == nil && info.NumRedelivered > 0
	}, 10*time.Second, 10*time.Millisecond)
	require.Equal(t, 1, runs.count())

	close(release)
	ev := out.wait(t, req.RequestID, 10*time.Second)
	require.Equal(t, schemas.OutcomeSucceeded, ev.Outcome)
	require.Eventually(t, func() bool { return h.requestsLeft() == 0 }, 10*time.Second, 10*time.Millisecond)
	require.Equal(t, 1, runs.count(), "the handler ran once")
	require.Empty(t, runs.overlaps())
	require.Equal(t, 1, out.count())
	require.Equal(t, 1, ev.Attempts, "the busy delivery burned no attempt")
}

// A replica whose ledger stops answering cannot renew its leases: after
// the lease time the attempt is cancelled (its handler sees transport.ErrLeaseLost)
// and its delivery settles nothing; another replica finishes the request.
func TestLeaseLostWhenTheLedgerStopsAnsweringCancelsTheAttempt(t *testing.T) {
	t.Parallel()
	h := newHarness(t, true)
	out := h.watchOutcomes()
	var cause atomic.Value
	blocked := make(chan struct{})
	p := persona("cut", handlers.Func(func(ctx context.Context, req *handlers.Request) (handlers.Result, error) {
		if req.Attempt == 1 {
			close(blocked)
			<-ctx.Done()
			cause.Store(context.Cause(ctx))
			return handlers.Result{}, ctx.Err()
		}
		return handlers.Result{}, nil
	}), fastPolicy(3))
	p.AckWait = fenceAckWait
	led := &cutLedger{Ledger: h.ledger}
	h.startMod(func(c *consumers.Config) { c.Ledger = led }, p)
	req := h.publish("cut", "t-cut")
	<-blocked
	led.cut.Store(true) // renewals fail from now on
	require.Eventually(t, func() bool { return cause.Load() != nil }, 10*time.Second, 10*time.Millisecond)
	require.ErrorIs(t, cause.Load().(error), transport.ErrLeaseLost)

	h.start(p)
	ev := out.wait(t, req.RequestID, 15*time.Second)
	require.Equal(t, schemas.OutcomeSucceeded, ev.Outcome)
	require.Equal(t, 2, ev.Attempts)
}

// cutLedger fails every lease renewal once cut.
type cutLedger struct {
	consumers.Ledger
	cut atomic.Bool
}

func (c *cutLedger) Renew(ctx context.Context, leases []ledger.Lease, ttl time.Duration) []error {
	if !c.cut.Load() {
		return c.Ledger.Renew(ctx, leases, ttl)
	}
	errs := make([]error, len(leases))
	for i := range errs {
		errs[i] = errors.New("connection refused")
	}
	return errs
}

// Redis loses everything (FLUSHALL) while a request is being retried: the
// attempt numbering falls back to JetStream's delivery count, so the
// request never runs more often than its policy allows, and it still ends
// in exactly one terminal record.
func TestLedgerWipedMidRetryKeepsTheAttemptLimit(t *testing.T) {
	t.Parallel()
	for _, wipeAfter := range []int{1, 2} {
		t.Run(fmt.Sprintf("AfterAttempt%d", wipeAfter), func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, false)
			rs := testenv.StartRedis(t)
			client := rs.Client(t)
			l, err := ledger.New(ledger.Config{Client: client})
			require.NoError(t, err)
			h.ledger = l
			out := h.watchOutcomes()
			var runs runLog
			wiped := make(chan struct{})
			p := persona("wiped", handlers.Func(func(_ context.Context, req *handlers.Request) (handlers.Result, error) {
				i := runs.begin("r", req.Attempt)
				defer runs.end(i)
				if runs.count() == wipeAfter {
					require.NoError(t, client.FlushAll(context.Background()).Err())
					close(wiped)
				}
				return handlers.Result{}, fmt.Errorf("still failing (attempt %d)", req.Attempt)
			}), fastPolicy(3))
			p.AckWait = fenceAckWait
			h.start(p)
			req := h.publish("wiped", "t-wiped")
			<-wiped
			ev := out.wait(t, req.RequestID, 20*time.Second)
			require.Equal(t, schemas.OutcomeQuarantined, ev.Outcome)
			require.Equal(t, schemas.ReasonExhausted, ev.Reason)
			require.Positive(t, ev.Attempts, "the exhausted event says how many attempts ran")
			require.LessOrEqual(t, ev.Attempts, 3)
			require.Eventually(t, func() bool { return h.requestsLeft() == 0 }, 10*time.Second, 10*time.Millisecond)
			require.LessOrEqual(t, runs.count(), 3, "no more runs than the policy allows")
			require.Empty(t, runs.overlaps())
			require.Equal(t, 1, out.count())
		})
	}
}
