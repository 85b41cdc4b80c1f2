package saga_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/personaq/personaq/consumers/saga"
	"github.com/personaq/personaq/dlq"
	"github.com/personaq/personaq/handlers"
	"github.com/personaq/personaq/retry"
	"github.com/personaq/personaq/schemas"
)

// A branch that cannot be deleted: the saga ends QUARANTINED — never
// COMPENSATED, never left RUNNING — after the policy's attempts, with a
// reason a person can act on and one compensation_failed record carrying
// the attempt history. A second run is a no-op.
func TestSweepQuarantinesSagaWhenBranchDeletionFails(t *testing.T) {
	t.Parallel()
	b := newBundle(t)
	var c calls
	r := b.runner(map[schemas.CompensationKind]saga.Func{schemas.CompensationDeleteBranch: c.wrap(reapBranch)})
	req := b.compensation("saga-42", schemas.CompensationDeleteBranch, "loop/42")

	rep := b.sweep(r)
	require.Empty(t, rep.Recovered)
	require.Len(t, rep.Errors, 1)
	require.Contains(t, rep.Errors[0], "saga saga-42: branch deletion failed for DELETE_BRANCH loop/42: protected branch")
	require.True(t, rep.Failed())

	sg := b.saga("saga-42")
	require.Equal(t, saga.Quarantined, sg.State)
	require.Equal(t, "branch deletion failed for DELETE_BRANCH loop/42: protected branch (after 2 attempts)", sg.TerminalReason)
	require.Equal(t, 2, sg.Attempts, "retried under its policy")
	require.Equal(t, 2, c.n("saga-42"))
	require.Len(t, sg.Errors, 2)

	recs := b.compensationRecords()
	require.Len(t, recs, 1)
	rec := recs[0].Record
	require.Equal(t, "saga-42", rec.SagaID)
	require.Equal(t, req.RequestID, rec.RequestID)
	require.Contains(t, rec.Detail, "DELETE_BRANCH loop/42")
	require.Contains(t, rec.Detail, "QUARANTINED")
	require.Equal(t, 2, rec.Attempts)
	require.Len(t, rec.Errors, 2)
	require.Equal(t, []int{1, 2}, []int{rec.Errors[0].Attempt, rec.Errors[1].Attempt})
	require.Equal(t, "protected branch", rec.Errors[1].Error)
	require.Equal(t, "retryable", rec.Errors[1].Class)
	got, err := schemas.DecodeCompensation(rec.Payload)
	require.NoError(t, err)
	require.Equal(t, req.Target, got.Target, "the request is kept")
	require.Equal(t, recs[0].Seq, sg.QuarantineSeq)

	// Re-run: a no-op for the quarantined saga, even for its request
	// published again (a new message past the dedup window).
	rep = b.sweep(r)
	require.Empty(t, rep.Recovered)
	require.Empty(t, rep.Errors)
	_, again, err := saga.Publish(ctx(t), b.js, b.topo, &schemas.CompensationRequest{SchemaVersion: schemas.Version,
		RequestID: req.RequestID + "-again", SagaID: req.SagaID, Kind: req.Kind, Target: req.Target, CreatedAt: time.Now().UTC()})
	require.NoError(t, err)
	require.Equal(t, saga.Quarantined, again.State)
	rep = b.sweep(r)
	require.Empty(t, rep.Errors)
	require.Equal(t, sg.Revision, b.saga("saga-42").Revision, "not re-mutated")
	require.Equal(t, 2, c.n("saga-42"), "not re-run")
	require.Len(t, b.compensationRecords(), 1)
	require.Zero(t, b.consumer().NumAckPending+int(b.consumer().NumPending), "every request settled")
}

// A failing-then-succeeding compensation is retried through the request's
// redelivery after the policy's delay, and ends COMPENSATED with the failed
// attempt in its history.
func TestRetryIsARedeliveryAfterThePolicyDelay(t *testing.T) {
	t.Parallel()
	b := newBundle(t)
	var c calls
	flaky := c.wrap(func(_ context.Context, req *schemas.CompensationRequest) error {
		if c.n(req.SagaID) == 1 {
			return handlers.Retryable(errors.New("index.lock exists"))
		}
		return nil
	})
	const delay = 700 * time.Millisecond
	pol := retry.Policy{Name: "test", MaxAttempts: 3, AttemptTimeout: 2 * time.Second, Schedule: retry.Fixed{Every: delay}}
	r := b.runner(map[schemas.CompensationKind]saga.Func{schemas.CompensationDeleteBranch: flaky}, pol)
	b.compensation("s-flaky", schemas.CompensationDeleteBranch, "loop/5")

	rep := b.sweep(r)
	require.Equal(t, []string{"s-flaky"}, rep.Recovered)
	require.Empty(t, rep.Errors)
	at := c.times("s-flaky")
	require.Len(t, at, 2)
	require.GreaterOrEqual(t, at[1].Sub(at[0]), delay, "the retry waited for the policy's delay")

	info := b.consumer()
	require.Equal(t, uint64(2), info.Delivered.Consumer, "the retry was a second delivery of the one request")
	require.Zero(t, info.NumAckPending+int(info.NumPending))

	sg := b.saga("s-flaky")
	require.Equal(t, saga.Compensated, sg.State)
	require.Equal(t, 2, sg.Attempts)
	require.Len(t, sg.Errors, 1)
	require.Equal(t, 1, sg.Errors[0].Attempt)
	require.Equal(t, "retryable", sg.Errors[0].Class)
	require.Equal(t, "index.lock exists", sg.Errors[0].Error)
	require.Empty(t, b.compensationRecords())
}

// While a retry is scheduled the request is held by the broker, not by a
// sleeping runner: a sweep bounded below the delay ends naming the saga.
func TestSweepBoundNamesSagasStillRetrying(t *testing.T) {
	t.Parallel()
	b := newBundle(t)
	fail := func(context.Context, *schemas.CompensationRequest) error { return errors.New("index.lock exists") }
	pol := retry.Policy{Name: "slow", MaxAttempts: 2, AttemptTimeout: time.Second, Schedule: retry.Fixed{Every: time.Hour}}
	r := b.runner(map[schemas.CompensationKind]saga.Func{schemas.CompensationDeleteBranch: fail}, pol)
	b.compensation("s-later", schemas.CompensationDeleteBranch, "loop/9")

	rep, err := r.Sweep(ctx(t), 300*time.Millisecond)
	require.NoError(t, err)
	require.Empty(t, rep.Recovered)
	require.Empty(t, rep.Errors)
	require.True(t, rep.Unfinished())
	require.Len(t, rep.Retrying, 1)
	require.Contains(t, rep.Retrying[0], "saga s-later: DELETE_BRANCH loop/9: 1 of 2 attempts made")
	require.Contains(t, rep.Retrying[0], "index.lock exists")
	require.Equal(t, saga.Running, b.saga("s-later").State)
	require.Equal(t, 1, b.consumer().NumAckPending, "the broker holds the scheduled retry")
}

func TestSweepHappyPathCompensates(t *testing.T) {
	t.Parallel()
	b := newBundle(t)
	r := b.runner(map[schemas.CompensationKind]saga.Func{schemas.CompensationDeleteBranch: reapBranch})
	b.compensation("saga-7", schemas.CompensationDeleteBranch, "loop/7")
	rep := b.sweep(r)
	require.Equal(t, []string{"saga-7"}, rep.Recovered)
	require.Empty(t, rep.Errors)
	sg := b.saga("saga-7")
	require.Equal(t, saga.Compensated, sg.State)
	require.Equal(t, 1, sg.Attempts)
	require.Empty(t, sg.TerminalReason)
	require.Empty(t, b.compensationRecords())
}

// One bad saga does not stop the others: the healthy siblings compensate.
func TestSweepMixedSagas(t *testing.T) {
	t.Parallel()
	b := newBundle(t)
	r := b.runner(map[schemas.CompensationKind]saga.Func{
		schemas.CompensationDeleteBranch: reapBranch, schemas.CompensationRemoveWorktree: succeed,
	})
	b.compensation("a-bad", schemas.CompensationDeleteBranch, "loop/42")
	b.compensation("b-good", schemas.CompensationRemoveWorktree, "/work/trees/loop-43")
	b.compensation("c-good", schemas.CompensationDeleteBranch, "loop/44")
	rep := b.sweep(r)
	require.ElementsMatch(t, []string{"b-good", "c-good"}, rep.Recovered)
	require.Len(t, rep.Errors, 1)
	require.Contains(t, rep.Errors[0], "a-bad")
	require.Equal(t, saga.Quarantined, b.saga("a-bad").State)
	require.Equal(t, saga.Compensated, b.saga("b-good").State)
	require.Equal(t, saga.Compensated, b.saga("c-good").State)
	all, err := saga.List(ctx(t), b.js, b.topo)
	require.NoError(t, err)
	require.Len(t, all, 3)
	for _, sg := range all {
		require.True(t, sg.State.Terminal(), sg.ID)
	}
}

func TestSweepQuarantinesUnhandledKind(t *testing.T) {
	t.Parallel()
	b := newBundle(t)
	r := b.runner(map[schemas.CompensationKind]saga.Func{schemas.CompensationRemoveWorktree: succeed})
	b.compensation("saga-lock", "RELEASE_LOCK", "lock/9")
	rep := b.sweep(r)
	require.Empty(t, rep.Recovered)
	require.Len(t, rep.Errors, 1)
	sg := b.saga("saga-lock")
	require.Equal(t, saga.Quarantined, sg.State)
	require.Equal(t, "no compensation handler registered for RELEASE_LOCK lock/9: parked for a person", sg.TerminalReason)
	require.Len(t, b.compensationRecords(), 1)
}

func TestSweepTerminalErrorAndPanicAreNotRetried(t *testing.T) {
	t.Parallel()
	b := newBundle(t)
	var c calls
	r := b.runner(map[schemas.CompensationKind]saga.Func{
		schemas.CompensationDeleteBranch: c.wrap(func(context.Context, *schemas.CompensationRequest) error {
			return handlers.Terminal(errors.New("repo gone"))
		}),
		schemas.CompensationRemoveWorktree: c.wrap(func(context.Context, *schemas.CompensationRequest) error { panic("boom") }),
	})
	b.compensation("s-term", schemas.CompensationDeleteBranch, "loop/1")
	b.compensation("s-panic", schemas.CompensationRemoveWorktree, "/tmp/x")
	rep := b.sweep(r)
	require.Len(t, rep.Errors, 2)
	require.Equal(t, 1, c.n("s-term"))
	require.Equal(t, 1, c.n("s-panic"))
	require.Equal(t, "branch deletion failed for DELETE_BRANCH loop/1: repo gone", b.saga("s-term").TerminalReason)
	require.Contains(t, b.saga("s-panic").TerminalReason, "worktree removal failed for REMOVE_WORKTREE /tmp/x: handler panicked: boom")
	require.Len(t, b.compensationRecords(), 2)
}

// A runner stopped mid-attempt (shutdown) hands the request back: the saga
// stays RUNNING, the cut attempt is not counted, and a later run finishes it.
func TestStopMidAttemptLeavesSagaRunning(t *testing.T) {
	t.Parallel()
	b := newBundle(t)
	started := make(chan struct{})
	block := func(ctx context.Context, _ *schemas.CompensationRequest) error {
		close(started)
		<-ctx.Done()
		return ctx.Err()
	}
	a := b.runner(map[schemas.CompensationKind]saga.Func{schemas.CompensationDeleteBranch: block})
	b.compensation("s-cut", schemas.CompensationDeleteBranch, "loop/8")
	require.NoError(t, a.Start(ctx(t)))
	<-started
	a.Stop()
	a.Stop()
	sg := b.saga("s-cut")
	require.Equal(t, saga.Running, sg.State)
	require.Zero(t, sg.Attempts)
	require.Equal(t, 1, sg.Released)

	rep := b.sweep(b.runner(map[schemas.CompensationKind]saga.Func{schemas.CompensationDeleteBranch: succeed}))
	require.Equal(t, []string{"s-cut"}, rep.Recovered)
	sg = b.saga("s-cut")
	require.Equal(t, saga.Compensated, sg.State)
	require.Equal(t, 1, sg.Attempts, "the released delivery did not count")
}

// A runner that dies mid-attempt (its connection gone, nothing settled)
// leaves the saga RUNNING; the request comes back after AckWait to another
// runner, which counts the vanished attempt and finishes the saga.
func TestCrashMidAttemptIsFinishedByAnotherRunner(t *testing.T) {
	t.Parallel()
	b := newBundle(t)
	b.topo.AckWait = time.Second
	started, unblock := make(chan struct{}), make(chan struct{})
	hang := func(context.Context, *schemas.CompensationRequest) error {
		close(started)
		<-unblock
		return nil
	}
	nc := b.nats.Conn(t)
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	a := b.runnerOn(js, map[schemas.CompensationKind]saga.Func{schemas.CompensationDeleteBranch: hang})
	require.NoError(t, saga.Provision(ctx(t), b.js, b.topo))
	b.compensation("s-crash", schemas.CompensationDeleteBranch, "loop/3")
	require.NoError(t, a.Start(ctx(t)))
	t.Cleanup(a.Stop)
	<-started
	nc.Close() // the crash: no heartbeat, no settle
	require.Equal(t, saga.Running, b.saga("s-crash").State)

	var c calls
	rep := b.sweep(b.runner(map[schemas.CompensationKind]saga.Func{schemas.CompensationDeleteBranch: c.wrap(succeed)}))
	close(unblock)
	require.Equal(t, []string{"s-crash"}, rep.Recovered)
	require.Equal(t, 1, c.n("s-crash"))
	sg := b.saga("s-crash")
	require.Equal(t, saga.Compensated, sg.State)
	require.Equal(t, 2, sg.Attempts, "the vanished attempt counts: its handler may have run")
}

// A compensation longer than AckWait keeps its request (InProgress
// heartbeats): it runs once.
func TestLongCompensationIsNotRedelivered(t *testing.T) {
	t.Parallel()
	b := newBundle(t)
	b.topo.AckWait = time.Second
	var c calls
	slow := c.wrap(func(ctx context.Context, _ *schemas.CompensationRequest) error {
		select {
		case <-time.After(2500 * time.Millisecond): // the work itself, longer than AckWait
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	})
	pol := fastPolicy()
	pol.AttemptTimeout = 10 * time.Second
	require.NoError(t, saga.Provision(ctx(t), b.js, b.topo))
	r := b.runner(map[schemas.CompensationKind]saga.Func{schemas.CompensationRemoveWorktree: slow}, pol)
	b.compensation("s-slow", schemas.CompensationRemoveWorktree, "/tmp/slow")
	rep := b.sweep(r)
	require.Equal(t, []string{"s-slow"}, rep.Recovered)
	require.Equal(t, 1, c.n("s-slow"))
	require.Equal(t, uint64(1), b.consumer().Delivered.Consumer, "never redelivered")
}

func TestSweepQuarantinesInvalidCompensationMessage(t *testing.T) {
	t.Parallel()
	b := newBundle(t)
	r := b.runner(nil)
	require.NoError(t, saga.Provision(ctx(t), b.js, b.topo))
	_, err := b.js.Publish(ctx(t), schemas.DefaultCompensationsPrefix+".DELETE_BRANCH", []byte(`{"saga_id": 42}`))
	require.NoError(t, err)
	rep := b.sweep(r)
	require.Len(t, rep.Errors, 1)
	require.Contains(t, rep.Errors[0], "invalid_message")
	es, err := b.insp.List(ctx(t), dlq.Filter{Reasons: []schemas.Reason{schemas.ReasonInvalidMessage}})
	require.NoError(t, err)
	require.Len(t, es, 1)
	require.Equal(t, []byte(`{"saga_id": 42}`), es[0].Record.Payload)
	rep = b.sweep(r)
	require.Empty(t, rep.Errors, "the invalid message is gone from the queue")
}

// A second, different compensation for a RUNNING saga is refused.
func TestSecondCompensationForRunningSagaIsRejected(t *testing.T) {
	t.Parallel()
	b := newBundle(t)
	b.compensation("s-one", schemas.CompensationDeleteBranch, "loop/1")
	other := &schemas.CompensationRequest{SchemaVersion: schemas.Version, RequestID: "other", SagaID: "s-one",
		Kind: schemas.CompensationDeleteBranch, Target: "loop/2", CreatedAt: time.Now().UTC()}
	_, _, err := saga.Publish(ctx(t), b.js, b.topo, other)
	require.NoError(t, err)
	// The first attempt fails, so the saga is RUNNING when the second
	// request comes; its retry (after 300 ms) compensates it.
	var c calls
	flaky := c.wrap(func(_ context.Context, req *schemas.CompensationRequest) error {
		if c.n(req.SagaID) == 1 {
			return errors.New("index.lock exists")
		}
		return nil
	})
	pol := retry.Policy{Name: "test", MaxAttempts: 2, AttemptTimeout: time.Second, Schedule: retry.Fixed{Every: 300 * time.Millisecond}}
	rep := b.sweep(b.runner(map[schemas.CompensationKind]saga.Func{schemas.CompensationDeleteBranch: flaky}, pol))
	require.Equal(t, []string{"s-one"}, rep.Recovered)
	require.Len(t, rep.Errors, 1)
	require.Contains(t, rep.Errors[0], "a saga carries one compensation")
	require.Equal(t, 2, c.n("s-one"))
	require.Equal(t, "loop/1", b.saga("s-one").Target)
}

// An operator who fixed the cause replays the compensation_failed record:
// the saga runs again and ends COMPENSATED.
func TestReplayReopensQuarantinedSaga(t *testing.T) {
	t.Parallel()
	b := newBundle(t)
	fixed := make(chan struct{})
	h := func(context.Context, *schemas.CompensationRequest) error {
		select {
		case <-fixed:
			return nil
		default:
			return handlers.Terminal(errors.New("protected branch"))
		}
	}
	r := b.runner(map[schemas.CompensationKind]saga.Func{schemas.CompensationDeleteBranch: h})
	req := b.compensation("saga-r", schemas.CompensationDeleteBranch, "loop/42")
	b.sweep(r)
	recs := b.compensationRecords()
	require.Len(t, recs, 1)

	close(fixed)
	rr, err := b.insp.Replay(ctx(t), dlq.Selection{Seqs: []uint64{recs[0].Seq}}, dlq.ReplayOptions{})
	require.NoError(t, err)
	require.Equal(t, req.RequestID+"-r1", rr.Items[0].NewRequestID)
	rep := b.sweep(r)
	require.Equal(t, []string{"saga-r"}, rep.Recovered)
	sg := b.saga("saga-r")
	require.Equal(t, saga.Compensated, sg.State)
	require.Equal(t, 1, sg.Reopened)
	require.Equal(t, 1, sg.Attempts)
	require.Empty(t, sg.Errors, "a reopened saga starts afresh")
}

// A saga left RUNNING with no request in the queue (taken in by an earlier
// version that ran compensations in process) is queued again and finished.
func TestSweepResumesSagaWithoutQueuedRequest(t *testing.T) {
	t.Parallel()
	b := newBundle(t)
	b.compensation("s-old", schemas.CompensationDeleteBranch, "loop/11")
	st, err := b.js.Stream(ctx(t), schemas.DefaultCompensationsStream)
	require.NoError(t, err)
	require.NoError(t, st.Purge(ctx(t)))
	rep := b.sweep(b.runner(map[schemas.CompensationKind]saga.Func{schemas.CompensationDeleteBranch: succeed}))
	require.Equal(t, []string{"s-old"}, rep.Recovered)
	require.Equal(t, saga.Compensated, b.saga("s-old").State)
}

func TestRunnerConfig(t *testing.T) {
	t.Parallel()
	_, err := saga.NewRunner(saga.Config{})
	require.ErrorIs(t, err, saga.ErrInvalidConfig)
	b := newBundle(t)
	cases := map[string]saga.Config{
		"BadKind":     {JetStream: b.js, Handlers: map[schemas.CompensationKind]saga.Func{"bad kind": succeed}},
		"NilHandler":  {JetStream: b.js, Handlers: map[schemas.CompensationKind]saga.Func{"X": nil}},
		"BadPolicy":   {JetStream: b.js, Policy: retry.Policy{MaxAttempts: -1}},
		"BadPolicies": {JetStream: b.js, Policies: map[schemas.CompensationKind]retry.Policy{"X": {MaxAttempts: -1}}},
	}
	for name, cfg := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := saga.NewRunner(cfg)
			require.ErrorIs(t, err, saga.ErrInvalidConfig)
		})
	}
	r := b.runner(nil)
	require.NoError(t, r.Start(context.Background()))
	r.Stop()
	r.Stop()
	_, err = saga.Get(ctx(t), b.js, b.topo, "nobody")
	require.ErrorIs(t, err, saga.ErrNotFound)
}
