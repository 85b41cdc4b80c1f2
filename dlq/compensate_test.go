package dlq_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/personaq/personaq/dlq"
	"github.com/personaq/personaq/handlers"
	"github.com/personaq/personaq/retry"
	"github.com/personaq/personaq/schemas"
)

// fastPolicy is LocalPolicy's shape (2 attempts) with millisecond waits.
func fastPolicy() retry.Policy {
	return retry.Policy{Name: "test", MaxAttempts: 2, AttemptTimeout: 2 * time.Second, Schedule: retry.Fixed{Every: 10 * time.Millisecond}}
}

// counter counts compensation calls by saga.
type counter struct {
	mu sync.Mutex
	n  map[string]int
}

func (c *counter) wrap(f dlq.CompensationFunc) dlq.CompensationFunc {
	return func(ctx context.Context, req *schemas.CompensationRequest) error {
		c.mu.Lock()
		if c.n == nil {
			c.n = map[string]int{}
		}
		c.n[req.SagaID]++
		c.mu.Unlock()
		return f(ctx, req)
	}
}

func (c *counter) calls(saga string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[saga]
}

// reapBranch fails for protected branches, like seed 003's reap_branch.
func reapBranch(_ context.Context, req *schemas.CompensationRequest) error {
	if req.Target == "loop/42" {
		return errors.New("protected branch")
	}
	return nil
}

func succeed(context.Context, *schemas.CompensationRequest) error { return nil }

func (b *bundle) sweeper(h map[schemas.CompensationKind]dlq.CompensationFunc) *dlq.Sweeper {
	b.t.Helper()
	s, err := dlq.NewSweeper(dlq.SweeperConfig{JetStream: b.js, Writer: b.w, Handlers: h, Policy: fastPolicy(), Logger: &b.log})
	require.NoError(b.t, err)
	return s
}

func (b *bundle) compensation(saga string, kind schemas.CompensationKind, target string) *schemas.CompensationRequest {
	b.t.Helper()
	req := &schemas.CompensationRequest{SchemaVersion: schemas.Version, RequestID: uuid.NewString(), SagaID: saga,
		Kind: kind, Target: target, TaskID: "task-" + saga, CreatedAt: time.Now().UTC()}
	_, sg, err := dlq.PublishCompensation(ctx(b.t), b.js, dlq.CompensationTopology{}, req)
	require.NoError(b.t, err)
	require.Equal(b.t, dlq.SagaRunning, sg.State)
	return req
}

func (b *bundle) saga(s *dlq.Sweeper, id string) *dlq.Saga {
	b.t.Helper()
	sg, err := s.Saga(ctx(b.t), id)
	require.NoError(b.t, err)
	return sg
}

func (b *bundle) compensationRecords() []dlq.Entry {
	b.t.Helper()
	es, err := b.insp.List(ctx(b.t), dlq.Filter{Reasons: []schemas.Reason{schemas.ReasonCompensationFailed}})
	require.NoError(b.t, err)
	return es
}

// Seed 003's adversarial case: the branch cannot be deleted, so the saga
// ends QUARANTINED — never COMPENSATED, never left RUNNING — with a
// reason a person can act on and a quarantine record.
func TestSweepQuarantinesSagaWhenBranchDeletionFails(t *testing.T) {
	t.Parallel()
	b := newBundle(t)
	var c counter
	s := b.sweeper(map[schemas.CompensationKind]dlq.CompensationFunc{schemas.CompensationDeleteBranch: c.wrap(reapBranch)})
	req := b.compensation("saga-42", schemas.CompensationDeleteBranch, "loop/42")

	rep, err := s.Sweep(ctx(t))
	require.NoError(t, err)
	require.Empty(t, rep.Recovered)
	require.Len(t, rep.Errors, 1)
	require.Contains(t, rep.Errors[0], "saga-42")
	require.Contains(t, rep.Errors[0], "branch deletion failed for DELETE_BRANCH loop/42: protected branch")
	require.True(t, rep.Failed())

	sg := b.saga(s, "saga-42")
	require.Equal(t, dlq.SagaQuarantined, sg.State)
	require.True(t, sg.State.Terminal())
	require.Equal(t, "branch deletion failed for DELETE_BRANCH loop/42: protected branch (after 2 attempts)", sg.TerminalReason)
	require.Equal(t, 2, sg.Attempts, "retried under its policy")
	require.Equal(t, 2, c.calls("saga-42"))
	inflight, err := s.InFlight(ctx(t))
	require.NoError(t, err)
	require.Empty(t, inflight)

	recs := b.compensationRecords()
	require.Len(t, recs, 1)
	rec := recs[0].Record
	require.Equal(t, "saga-42", rec.SagaID)
	require.Equal(t, req.RequestID, rec.RequestID)
	require.Contains(t, rec.Detail, "DELETE_BRANCH loop/42")
	require.Contains(t, rec.Detail, "QUARANTINED")
	require.Len(t, rec.Errors, 2)
	require.Equal(t, "protected branch", rec.Errors[1].Error)
	got, err := schemas.DecodeCompensation(rec.Payload)
	require.NoError(t, err)
	require.Equal(t, req.Target, got.Target, "the request is kept")
	require.Equal(t, recs[0].Seq, sg.QuarantineSeq)

	// Re-sweep: a no-op for the quarantined saga.
	rep, err = s.Sweep(ctx(t))
	require.NoError(t, err)
	require.Empty(t, rep.Recovered)
	require.Empty(t, rep.Errors)
	again := b.saga(s, "saga-42")
	require.Equal(t, sg.Revision, again.Revision, "not re-mutated")
	require.Equal(t, 2, c.calls("saga-42"), "not re-run")
	require.Len(t, b.compensationRecords(), 1)
}

func TestSweepHappyPathCompensates(t *testing.T) {
	t.Parallel()
	b := newBundle(t)
	s := b.sweeper(map[schemas.CompensationKind]dlq.CompensationFunc{schemas.CompensationDeleteBranch: reapBranch})
	b.compensation("saga-7", schemas.CompensationDeleteBranch, "loop/7")
	rep, err := s.Sweep(ctx(t))
	require.NoError(t, err)
	require.Equal(t, []string{"saga-7"}, rep.Recovered)
	require.Empty(t, rep.Errors)
	sg := b.saga(s, "saga-7")
	require.Equal(t, dlq.SagaCompensated, sg.State)
	require.Empty(t, sg.TerminalReason)
	require.Empty(t, b.compensationRecords())
}

// One bad saga does not stop the sweep: the healthy sibling compensates.
func TestSweepMixedSagas(t *testing.T) {
	t.Parallel()
	b := newBundle(t)
	s := b.sweeper(map[schemas.CompensationKind]dlq.CompensationFunc{
		schemas.CompensationDeleteBranch: reapBranch, schemas.CompensationRemoveWorktree: succeed,
	})
	b.compensation("a-bad", schemas.CompensationDeleteBranch, "loop/42")
	b.compensation("b-good", schemas.CompensationRemoveWorktree, "/work/trees/loop-43")
	b.compensation("c-good", schemas.CompensationDeleteBranch, "loop/44")
	rep, err := s.Sweep(ctx(t))
	require.NoError(t, err)
	require.Equal(t, []string{"b-good", "c-good"}, rep.Recovered)
	require.Len(t, rep.Errors, 1)
	require.Contains(t, rep.Errors[0], "a-bad")
	require.Equal(t, dlq.SagaQuarantined, b.saga(s, "a-bad").State)
	require.Equal(t, dlq.SagaCompensated, b.saga(s, "b-good").State)
	require.Equal(t, dlq.SagaCompensated, b.saga(s, "c-good").State)
	inflight, err := s.InFlight(ctx(t))
	require.NoError(t, err)
	require.Empty(t, inflight)
}

func TestSweepQuarantinesUnhandledKind(t *testing.T) {
	t.Parallel()
	b := newBundle(t)
	s := b.sweeper(map[schemas.CompensationKind]dlq.CompensationFunc{schemas.CompensationRemoveWorktree: succeed})
	b.compensation("saga-lock", "RELEASE_LOCK", "lock/9")
	rep, err := s.Sweep(ctx(t))
	require.NoError(t, err)
	require.Empty(t, rep.Recovered)
	require.Len(t, rep.Errors, 1)
	sg := b.saga(s, "saga-lock")
	require.Equal(t, dlq.SagaQuarantined, sg.State)
	require.Equal(t, "no compensation handler registered for RELEASE_LOCK lock/9: parked for a person", sg.TerminalReason)
	require.Len(t, b.compensationRecords(), 1)
}

func TestSweepTerminalErrorAndPanicAreNotRetried(t *testing.T) {
	t.Parallel()
	b := newBundle(t)
	var c counter
	s := b.sweeper(map[schemas.CompensationKind]dlq.CompensationFunc{
		schemas.CompensationDeleteBranch: c.wrap(func(context.Context, *schemas.CompensationRequest) error {
			return handlers.Terminal(errors.New("repo gone"))
		}),
		schemas.CompensationRemoveWorktree: c.wrap(func(context.Context, *schemas.CompensationRequest) error { panic("boom") }),
	})
	b.compensation("s-term", schemas.CompensationDeleteBranch, "loop/1")
	b.compensation("s-panic", schemas.CompensationRemoveWorktree, "/tmp/x")
	rep, err := s.Sweep(ctx(t))
	require.NoError(t, err)
	require.Len(t, rep.Errors, 2)
	require.Equal(t, 1, c.calls("s-term"))
	require.Equal(t, 1, c.calls("s-panic"))
	require.Equal(t, "branch deletion failed for DELETE_BRANCH loop/1: repo gone", b.saga(s, "s-term").TerminalReason)
	require.Contains(t, b.saga(s, "s-panic").TerminalReason, "worktree removal failed for REMOVE_WORKTREE /tmp/x: handler panicked: boom")
}

// A retry that succeeds is a success: COMPENSATED after 2 attempts.
func TestSweepRetriesTransientFailures(t *testing.T) {
	t.Parallel()
	b := newBundle(t)
	var c counter
	flaky := c.wrap(func(_ context.Context, req *schemas.CompensationRequest) error {
		if c.calls(req.SagaID) == 1 {
			return errors.New("git lock held")
		}
		return nil
	})
	s := b.sweeper(map[schemas.CompensationKind]dlq.CompensationFunc{schemas.CompensationDeleteBranch: flaky})
	b.compensation("s-flaky", schemas.CompensationDeleteBranch, "loop/5")
	rep, err := s.Sweep(ctx(t))
	require.NoError(t, err)
	require.Equal(t, []string{"s-flaky"}, rep.Recovered)
	require.Equal(t, 2, b.saga(s, "s-flaky").Attempts)
}

// A sweep cut short leaves the saga RUNNING: nothing is claimed.
func TestSweepInterruptedClaimsNothing(t *testing.T) {
	t.Parallel()
	b := newBundle(t)
	started := make(chan struct{})
	block := func(ctx context.Context, _ *schemas.CompensationRequest) error {
		close(started)
		<-ctx.Done()
		return ctx.Err()
	}
	s := b.sweeper(map[schemas.CompensationKind]dlq.CompensationFunc{schemas.CompensationDeleteBranch: block})
	b.compensation("s-cut", schemas.CompensationDeleteBranch, "loop/8")
	c, cancel := context.WithCancel(context.Background())
	go func() { <-started; cancel() }()
	rep, err := s.Sweep(c)
	require.ErrorIs(t, err, context.Canceled)
	require.Empty(t, rep.Recovered)
	require.Empty(t, rep.Errors)
	require.Equal(t, dlq.SagaRunning, b.saga(s, "s-cut").State)
}

func TestSweepQuarantinesInvalidCompensationMessage(t *testing.T) {
	t.Parallel()
	b := newBundle(t)
	s := b.sweeper(nil)
	require.NoError(t, s.Provision(ctx(t)))
	_, err := b.js.Publish(ctx(t), dlq.DefaultCompensationsPrefix+".DELETE_BRANCH", []byte(`{"saga_id": 42}`))
	require.NoError(t, err)
	rep, err := s.Sweep(ctx(t))
	require.NoError(t, err)
	require.Len(t, rep.Errors, 1)
	require.Contains(t, rep.Errors[0], "invalid_message")
	es, err := b.insp.List(ctx(t), dlq.Filter{Reasons: []schemas.Reason{schemas.ReasonInvalidMessage}})
	require.NoError(t, err)
	require.Len(t, es, 1)
	require.Equal(t, []byte(`{"saga_id": 42}`), es[0].Record.Payload)
	rep, err = s.Sweep(ctx(t))
	require.NoError(t, err)
	require.Empty(t, rep.Errors, "the invalid message is gone from the queue")
}

// An operator who fixed the cause replays the compensation_failed record:
// the saga runs again and ends COMPENSATED. A late duplicate request for
// a terminal saga is ignored.
func TestReplayReopensQuarantinedSaga(t *testing.T) {
	t.Parallel()
	b := newBundle(t)
	var fixed bool
	h := func(ctx context.Context, req *schemas.CompensationRequest) error {
		if !fixed {
			return handlers.Terminal(errors.New("protected branch"))
		}
		return nil
	}
	s := b.sweeper(map[schemas.CompensationKind]dlq.CompensationFunc{schemas.CompensationDeleteBranch: h})
	req := b.compensation("saga-r", schemas.CompensationDeleteBranch, "loop/42")
	_, err := s.Sweep(ctx(t))
	require.NoError(t, err)
	recs := b.compensationRecords()
	require.Len(t, recs, 1)

	// The same request published again (not a replay) changes nothing.
	_, sg, err := dlq.PublishCompensation(ctx(t), b.js, dlq.CompensationTopology{}, req)
	require.NoError(t, err)
	require.Equal(t, dlq.SagaQuarantined, sg.State)

	fixed = true
	rr, err := b.insp.Replay(ctx(t), dlq.Selection{Seqs: []uint64{recs[0].Seq}}, dlq.ReplayOptions{})
	require.NoError(t, err)
	require.Equal(t, req.RequestID+"-r1", rr.Items[0].NewRequestID)
	rep, err := s.Sweep(ctx(t))
	require.NoError(t, err)
	require.Equal(t, []string{"saga-r"}, rep.Recovered)
	sg = b.saga(s, "saga-r")
	require.Equal(t, dlq.SagaCompensated, sg.State)
	require.Equal(t, 1, sg.Reopened)
}

func TestSweeperConfig(t *testing.T) {
	t.Parallel()
	_, err := dlq.NewSweeper(dlq.SweeperConfig{})
	require.ErrorIs(t, err, dlq.ErrInvalidConfig)
	b := newBundle(t)
	_, err = dlq.NewSweeper(dlq.SweeperConfig{JetStream: b.js, Handlers: map[schemas.CompensationKind]dlq.CompensationFunc{"bad kind": succeed}})
	require.ErrorIs(t, err, dlq.ErrInvalidConfig)
	s := b.sweeper(nil)
	require.NoError(t, s.Start(context.Background()))
	s.Stop()
	s.Stop()
}
