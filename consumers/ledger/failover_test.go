package ledger_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/personaq/personaq/consumers/ledger"
	"github.com/personaq/personaq/integration/testenv"
	"github.com/personaq/personaq/retry"
)

// TestLedgerClusterReshardAndFailover runs attempts against a Redis Cluster
// while the slots of the tasks being worked on move to another master
// (CLUSTER SETSLOT + MIGRATE), and then while a replica takes over its
// master (CLUSTER FAILOVER): nothing acknowledged is lost and no step gets
// more attempts than its limit.
func TestLedgerClusterReshardAndFailover(t *testing.T) {
	t.Parallel()
	c := testenv.StartRedisCluster(t, 3, 1)
	w := startWorkload(t, c.Client(t))

	w.waitOps(t, 150)
	moved, slots := 0, 0
	migrated := w.upcoming(40)
	for _, task := range migrated {
		slot, err := c.KeySlot(t.Context(), "{"+task+"}")
		require.NoError(t, err)
		src, err := c.MasterOf(t.Context(), slot)
		require.NoError(t, err)
		n, err := c.MigrateSlot(t.Context(), slot, otherMaster(t, c, src))
		require.NoError(t, err)
		moved += n
		slots++
	}
	c.WaitHealthy(t)
	t.Logf("migrated %d slots (%d keys) mid-workload", slots, moved)
	require.Positive(t, moved, "the migrated slots held keys of tasks in flight")
	// What `task show` reads works on the slots' new masters.
	l, err := ledger.New(ledger.Config{Client: c.Client(t), Prefix: "wl"})
	require.NoError(t, err)
	for _, task := range migrated[:workloadWorkers] {
		steps, err := l.Steps(t.Context(), task)
		require.NoError(t, err)
		require.Equal(t, []ledger.StepKey{{TaskID: task, Step: "s"}}, steps)
	}

	w.waitOps(t, w.ops.Load()+150)
	slot, _, replica := busyShard(t, c, w)
	require.NoError(t, replica.Client(t).Do(t.Context(), "CLUSTER", "FAILOVER").Err())
	waitMaster(t, c, slot, replica)
	c.WaitHealthy(t)

	w.waitOps(t, w.ops.Load()+150)
	w.stopAndCheck(t, false)
}

// TestLedgerClusterMasterKilled kills (SIGKILL) the master serving tasks in
// flight; its replica is promoted after the cluster node timeout and the
// workload carries on: nothing acknowledged is lost, no limit exceeded.
func TestLedgerClusterMasterKilled(t *testing.T) {
	t.Parallel()
	c := testenv.StartRedisCluster(t, 3, 1)
	w := startWorkload(t, c.Client(t))

	w.waitOps(t, 150)
	slot, master, replica := busyShard(t, c, w)
	master.Stop()
	waitMaster(t, c, slot, replica)
	c.WaitHealthy(t)

	w.waitOps(t, w.ops.Load()+150)
	w.stopAndCheck(t, true)
	t.Logf("ledger calls that failed during the failover (released, not counted): %d", w.errs.Load())
}

// TestLedgerSentinelFailover kills the master behind Sentinel mid-workload;
// the sentinels promote the replica and go-redis follows them.
func TestLedgerSentinelFailover(t *testing.T) {
	t.Parallel()
	s := testenv.StartRedisSentinel(t, 1)
	w := startWorkload(t, s.Client(t))

	w.waitOps(t, 150)
	s.Data[0].Stop()
	require.Eventually(t, func() bool {
		m, err := s.Master(t.Context())
		return err == nil && m == s.Data[1]
	}, 20*time.Second, 20*time.Millisecond, "the sentinels promote the replica")

	w.waitOps(t, w.ops.Load()+150)
	w.stopAndCheck(t, true)
	t.Logf("ledger calls that failed during the failover (released, not counted): %d", w.errs.Load())
}

// busyShard returns the slot of a task the workers hold now, the master
// that serves it and that master's replica.
func busyShard(t *testing.T, c *testenv.RedisCluster, w *workload) (int, *testenv.Redis, *testenv.Redis) {
	t.Helper()
	slot, err := c.KeySlot(t.Context(), "{"+w.upcoming(1)[0]+"}")
	require.NoError(t, err)
	master, err := c.MasterOf(t.Context(), slot)
	require.NoError(t, err)
	replica, err := c.ReplicaOf(t.Context(), master)
	require.NoError(t, err)
	return slot, master, replica
}

func otherMaster(t *testing.T, c *testenv.RedisCluster, not *testenv.Redis) *testenv.Redis {
	t.Helper()
	for _, n := range c.Nodes {
		if n == not || !n.Running() {
			continue
		}
		info, err := n.Client(t).Do(t.Context(), "ROLE").Slice()
		if err == nil && len(info) > 0 && info[0] == "master" {
			return n
		}
	}
	t.Fatal("no other master")
	return nil
}

func waitMaster(t *testing.T, c *testenv.RedisCluster, slot int, want *testenv.Redis) {
	t.Helper()
	require.Eventually(t, func() bool {
		m, err := c.MasterOf(t.Context(), slot)
		return err == nil && m == want
	}, 20*time.Second, 20*time.Millisecond, "the replica serves the slot")
}

// workload runs task steps the way the runtime does — Begin with a lease,
// the handler, a fenced Finish — on several workers, taking task after
// task until stopped. A ledger error releases the attempt without counting
// it (as the runtime does) and is retried after a short pause. It records
// which attempt numbers handlers ran and which Finish calls Redis
// acknowledged, for stopAndCheck.
type workload struct {
	l    *ledger.Ledger
	next atomic.Int64 // next task index
	ops  atomic.Int64 // acknowledged ledger calls
	errs atomic.Int64 // failed ledger calls
	stop atomic.Bool

	mu    sync.Mutex
	runs  map[string][]int // task → attempt numbers its handler ran, in order
	acked map[string][]int // task → attempts whose Finish was acknowledged
	won   map[string]bool  // task → its successful Finish was acknowledged
	wg    sync.WaitGroup
}

const (
	workloadMax     = 3                      // attempts per step
	workloadWorkers = 12                     // concurrent steps
	workloadLease   = 400 * time.Millisecond // lease of an attempt
)

// succeedsAt is the attempt at which task i succeeds; 4 never does (it ends
// with its attempts spent).
func succeedsAt(i int) int { return i%4 + 1 }

func startWorkload(t *testing.T, c redis.UniversalClient) *workload {
	t.Helper()
	l, err := ledger.New(ledger.Config{Client: c, Prefix: "wl"})
	require.NoError(t, err)
	w := &workload{l: l, runs: map[string][]int{}, acked: map[string][]int{}, won: map[string]bool{}}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(func() { w.stop.Store(true); cancel(); w.wg.Wait() })
	for range workloadWorkers {
		w.wg.Go(func() {
			for !w.stop.Load() {
				i := int(w.next.Add(1) - 1)
				w.runTask(ctx, i)
			}
		})
	}
	return w
}

func taskName(i int) string { return fmt.Sprintf("wl-task-%d", i) }

// upcoming names n tasks from those in flight on: the ones the workers hold
// now, then the ones they take next.
func (w *workload) upcoming(n int) []string {
	first := max(int(w.next.Load())-workloadWorkers, 0)
	out := make([]string, n)
	for i := range out {
		out[i] = taskName(first + i)
	}
	return out
}

// runTask takes task i's step until it succeeded or spent its attempts.
func (w *workload) runTask(ctx context.Context, i int) {
	key := ledger.StepKey{TaskID: taskName(i), Step: "s"}
	for ctx.Err() == nil {
		b, err := w.l.Begin(ctx, key, key.TaskID, ledger.WithLease(workloadLease))
		if !w.count(ctx, err) {
			continue
		}
		switch {
		case b.Done:
			return
		case b.Busy:
			pause(ctx, b.BusyFor)
			continue
		case b.Attempt > workloadMax:
			// Spent: give the number back, as the runtime does.
			_ = w.l.Finish(ctx, key, retry.Attempt{Number: b.Attempt}, ledger.FinishOptions{RequestID: key.TaskID, Lease: b.Lease})
			return
		}
		w.record(w.runs, key.TaskID, b.Attempt)
		pause(ctx, time.Millisecond) // the handler
		ok := b.Attempt == succeedsAt(i)
		a := retry.Attempt{Number: b.Attempt, Class: retry.ClassRetryable, Error: "not yet"}
		if ok {
			a = retry.Attempt{Number: b.Attempt, Class: retry.ClassSucceeded}
		}
		if w.finish(ctx, key, a, b.Lease, ok) && ok {
			return
		}
	}
}

// finish retries a fenced Finish until Redis acknowledges it or the lease
// is gone (the next Begin then records the attempt as lost, or finds it
// finished by a call whose reply was lost).
func (w *workload) finish(ctx context.Context, key ledger.StepKey, a retry.Attempt, lease ledger.Lease, ok bool) bool {
	for ctx.Err() == nil {
		err := w.l.Finish(ctx, key, a, ledger.FinishOptions{Counted: true, Succeeded: ok, RequestID: key.TaskID, Lease: lease})
		if errors.Is(err, ledger.ErrLeaseLost) {
			return false
		}
		if w.count(ctx, err) {
			w.record(w.acked, key.TaskID, a.Number)
			if ok {
				w.mu.Lock()
				w.won[key.TaskID] = true
				w.mu.Unlock()
			}
			return true
		}
	}
	return false
}

// count counts a ledger call; after a failure it pauses and reports false.
func (w *workload) count(ctx context.Context, err error) bool {
	if err == nil {
		w.ops.Add(1)
		return true
	}
	w.errs.Add(1)
	pause(ctx, 20*time.Millisecond)
	return false
}

func (w *workload) record(m map[string][]int, task string, n int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	m[task] = append(m[task], n)
}

// pause is a client's back-off (or the handler's work), not a wait for an
// event: the workload runs against whatever state the servers are in.
func pause(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

func (w *workload) waitOps(t *testing.T, n int64) {
	t.Helper()
	require.Eventually(t, func() bool { return w.ops.Load() >= n }, 30*time.Second, 5*time.Millisecond,
		"%d ledger calls acknowledged (have %d, %d failed)", n, w.ops.Load(), w.errs.Load())
}

// stopAndCheck lets the workers finish their tasks, then checks every task:
// its handler ran attempt numbers within the limit; and, when no write may
// have been lost (lossy false: a resharding or a coordinated failover),
// distinct, increasing numbers, every acknowledged Finish in the ledger,
// every acknowledged success's completion marker. A master killed with
// SIGKILL (lossy) can lose its last acknowledged writes — Redis replicates
// asynchronously — so there those are counted and logged, not failed.
func (w *workload) stopAndCheck(t *testing.T, lossy bool) {
	t.Helper()
	w.stop.Store(true)
	w.wg.Wait()
	tasks := int(w.next.Load())
	require.Greater(t, tasks, 40)
	lost := 0
	check := func(ok bool, format string, args ...any) {
		if ok {
			return
		}
		if !lossy {
			t.Fatalf(format, args...)
		}
		lost++
		t.Logf("lost to asynchronous replication: "+format, args...)
	}
	for i := range tasks {
		task := taskName(i)
		runs := w.runs[task]
		if len(runs) > 0 {
			require.LessOrEqual(t, slices.Max(runs), workloadMax, "%s ran attempts %v, limit %d", task, runs, workloadMax)
		}
		check(slices.IsSorted(runs) && len(slices.Compact(slices.Clone(runs))) == len(runs),
			"%s: attempts ran %v: each number once, in order", task, runs)
		h, st, err := w.l.History(t.Context(), ledger.StepKey{TaskID: task, Step: "s"})
		require.NoError(t, err)
		recorded := map[int]retry.Class{}
		for _, a := range h {
			recorded[a.Number] = a.Class
		}
		for _, n := range w.acked[task] {
			_, ok := recorded[n]
			check(ok, "%s: acknowledged attempt %d lost (history %v)", task, n, numbers(h))
		}
		if w.won[task] {
			check(st.Done, "%s: acknowledged success lost", task)
		}
	}
	t.Logf("%d tasks, %d ledger calls acknowledged, %d failed and retried, %d checks lost to the killed master", tasks, w.ops.Load(), w.errs.Load(), lost)
}
