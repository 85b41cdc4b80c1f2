//go:build integration

package integration

import (
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The fault suite (issue 14's proof): real `personaq serve` processes, a
// real nats-server and redis-server, a command persona that logs when each
// run starts and ends. Each scenario runs a fault against running work and
// then checks every request (faultEnv.check): exactly one terminal record,
// runs and recorded attempts within the maximum, no two runs of one
// request overlapping in time, nothing lost. The scenarios run in parallel
// with each other (after the container scenarios, which run alone).

// A replica is frozen (SIGSTOP, its agents' process groups too, so the
// frozen runs do not go on) for at least 2×AckWait while it runs attempts
// of every kind: success, fail-once, terminal-once, max 2 attempts. The
// other replica takes the frozen requests over; when the frozen one wakes
// it cancels its attempts (its agents are killed where they stand) and
// settles nothing.
func TestFaultFrozenReplica(t *testing.T) {
	t.Parallel()
	e := newFaultEnv(t, 1)
	reps := e.replicas("frozen", 2, 4)
	a := reps[0]
	reqs := e.requests("frozen", 4, "ok", "failonce", "termonce", "max2")
	e.publish(reqs...)

	waitUntil(t, "frozen-1 running 3 agents", 30*time.Second, func() bool { return len(a.agents()) >= 3 })
	require.NoError(t, a.signal(syscall.SIGSTOP))
	// A supervisor forked just before the replica stopped starts its agent
	// a moment later: wait for every agent before listing and freezing
	// them, so that none runs unlisted (its run would have no end line).
	sups := waitForAgents(t, a)
	frozen := a.agents()
	for _, pid := range sups { // each leads its agent's group
		_ = syscall.Kill(-pid, syscall.SIGSTOP)
	}
	stoppedAt := time.Now()
	e.clipped(frozen, stoppedAt)
	held := e.requestsOf(frozen)
	// Frozen for 2×AckWait, and until the other replica has taken every
	// frozen request over.
	waitUntil(t, "frozen requests taken over", 60*time.Second, func() bool {
		return time.Since(stoppedAt) >= 2*faultAckWait && e.rerunAfter(held, stoppedAt)
	})
	frozenFor := time.Since(stoppedAt)
	require.NoError(t, a.signal(syscall.SIGCONT))
	waitUntil(t, "the woken replica's stopped agents killed", 15*time.Second, func() bool {
		return !slices.ContainsFunc(frozen, running)
	})
	res := e.check(reqs, 2*time.Minute)
	e.note("frozen %s (AckWait %s) holding %d agents; on waking it abandoned %d attempts (lease lost) and killed them",
		frozenFor.Round(100*time.Millisecond), faultAckWait, len(frozen), countLines(a.log, "attempt abandoned: its lease was lost"))
	e.record(res)
}

// The same request published twice under different Nats-Msg-Ids (what a
// watermill Publisher does) while its first delivery runs: the second
// delivery finds the live lease and waits; the request runs once.
func TestFaultSameRequestTwoMessageIDs(t *testing.T) {
	t.Parallel()
	e := newFaultEnv(t, 1)
	e.replicas("twice", 2, 4)
	reqs := e.requests("twice", 6, "ok", "failonce")
	e.publish(reqs...)
	waitUntil(t, "every request running", 30*time.Second, func() bool { return e.started(reqs) })
	for _, r := range reqs {
		e.publishMsg(r, r.RequestID+"-again")
	}
	res := e.check(reqs, 2*time.Minute)
	runs := e.runs()
	needs := map[string]int{"ok": 1, "failonce": 2}
	for _, r := range reqs {
		require.Len(t, runs[r.RequestID], needs[r.Persona], "%s (%s) ran once per attempt it needed", r.RequestID, r.Persona)
	}
	e.note("%d requests each published again under a second message id while running; each ran once per attempt it needed", len(reqs))
	e.record(res)
}

// A replica is SIGKILLed while its agents run: no agent is left (they get
// the parent-death signal); the other replica reruns their requests once
// their leases expire.
func TestFaultKillReplicaWithAgents(t *testing.T) {
	t.Parallel()
	e := newFaultEnv(t, 1)
	reps := e.replicas("killed", 2, 4)
	a := reps[0]
	reqs := e.requests("killed", 6, "ok", "failonce")
	e.publish(reqs...)
	waitUntil(t, "killed-1 running 4 agents", 30*time.Second, func() bool { return len(a.agents()) >= 4 })
	// Stopped first, so the agents listed are all it has when it dies: a
	// running replica may start another agent between the listing and the
	// kill, which the check would then find never ended.
	require.NoError(t, a.signal(syscall.SIGSTOP))
	waitForAgents(t, a)
	agents := a.agents()
	killedAt := time.Now()
	a.kill()
	waitUntil(t, "no agent of the killed replica left", 5*time.Second, func() bool {
		return !slices.ContainsFunc(agents, running)
	})
	gone := time.Now()
	e.clipped(agents, gone)
	res := e.check(reqs, 2*time.Minute)
	e.note("SIGKILL with %d agents running: no agent left %s after the kill", len(agents), gone.Sub(killedAt).Round(time.Millisecond))
	e.record(res)
}

// NATS is SIGKILLed mid-run, with attempts running and retries waiting,
// and started again on its store: settles the replicas buffered while it
// was down must not start extra attempts beside live ones.
func TestFaultNATSKill9(t *testing.T) {
	t.Parallel()
	e := newFaultEnv(t, 1)
	e.replicas("natskill", 2, 4)
	reqs := e.requests("natskill", 6, "ok", "failonce", "max2")
	e.publish(reqs...)
	waitUntil(t, "a quarter settled", 60*time.Second, func() bool {
		return e.obs.poll(e.ctx) == nil && e.settledCount(reqs) >= len(reqs)/4
	})
	settled := e.settledCount(reqs)
	e.nats[0].kill()
	down := time.Now()
	e.nats[0].restart(t)
	res := e.check(reqs, 2*time.Minute)
	e.note("nats-server SIGKILLed with %d of %d settled, listening again %s later on its store", settled, len(reqs),
		time.Since(down).Round(100*time.Millisecond))
	e.record(res)
}

// Redis loses everything twice mid-run: FLUSHALL, then a restart without
// persistence. JetStream's delivery count and the terminal record are the
// floors: no request runs more often than its maximum attempts, and no
// request that succeeded runs again.
func TestFaultRedisWiped(t *testing.T) {
	t.Parallel()
	e := newFaultEnv(t, 1)
	e.replicas("wiped", 2, 4)
	reqs := e.requests("wiped", 6, "ok", "failonce", "failall")
	e.publish(reqs...)
	waitUntil(t, "a third settled", 60*time.Second, func() bool {
		return e.obs.poll(e.ctx) == nil && e.settledCount(reqs) >= len(reqs)/3
	})
	flushed := e.settledCount(reqs)
	require.NoError(t, e.rdb.FlushAll(e.ctx).Err())
	waitUntil(t, "two thirds settled", 60*time.Second, func() bool {
		return e.obs.poll(e.ctx) == nil && e.settledCount(reqs) >= 2*len(reqs)/3
	})
	restarted := e.settledCount(reqs)
	e.redis.Restart(t)
	res := e.check(reqs, 2*time.Minute)
	for id, rs := range e.runs() {
		for i, r := range rs {
			if r.status == "0" && i < len(rs)-1 {
				t.Errorf("%s: attempt %d succeeded (pid %d) and the request ran again", id, r.attempt, r.pid)
			}
		}
	}
	e.note("FLUSHALL with %d of %d settled, redis-server restarted empty with %d settled", flushed, len(reqs), restarted)
	e.record(res)
}

// On a 3-node cluster (streams R3) the node leading the retrying persona's
// consumer is SIGKILLed while requests wait for their retry (3 s after a
// failed first attempt), and started again: the retries run once, never
// beside each other, and on time but for the failover — the persona's
// AckWait is a minute, so a retry whose nak was lost with the leader and
// not sent again would wait that minute.
func TestFaultClusterNodeKilledMidRetry(t *testing.T) {
	t.Parallel()
	e := newFaultEnv(t, 3)
	e.provision()
	e.replicas("cluster", 2, 4)
	reqs := e.requests("cluster", 8, "retryslow", "ok")
	e.publish(reqs...)
	waitUntil(t, "half the retrying requests failed their first attempt", 60*time.Second, func() bool {
		failed := 0
		for _, rs := range e.runs() {
			if len(rs) == 1 && rs[0].status == "75" {
				failed++
			}
		}
		return failed >= 4
	})
	leader := e.consumerLeader("retryslow")
	victim := e.node(leader)
	require.NotNil(t, victim, "retryslow consumer leader %q", leader)
	victim.kill()
	killedAt := time.Now()
	waitUntil(t, "a new consumer leader", 30*time.Second, func() bool {
		l := e.consumerLeader("retryslow")
		return l != "" && l != leader
	})
	failover := time.Since(killedAt)
	victim.restart(t)
	res := e.check(reqs, 2*time.Minute)
	late := e.retryLateness(reqs, 3*time.Second)
	e.note("retryslow consumer leader %s SIGKILLed mid-retry, new leader after %s, restarted; retries at most %s late (AckWait %s)",
		leader, failover.Round(100*time.Millisecond), late.Round(100*time.Millisecond), slowAckWait)
	require.Less(t, late, failover+10*time.Second, "a retry lost in the failover waited for AckWait")
	e.record(res)
}

// waitForAgents waits, once replica a is stopped, until each of its
// supervisors runs its agent (one forked just before the stop starts it a
// moment later), and returns the supervisors.
func waitForAgents(t *testing.T, a *replicaProc) []int {
	t.Helper()
	sups := a.supervisors()
	waitUntil(t, "every supervisor of the stopped replica running its agent", 2*time.Second, func() bool {
		return !slices.ContainsFunc(sups, func(s int) bool { return len(childrenOf(s)) == 0 })
	})
	return sups
}

// stoppedAgents waits, once replica a is stopped, until each of its
// supervisors runs its agent and each agent has logged its start, and
// returns the supervisors (each leads its agent's group) and the agents:
// an agent exec'd just after the stop logs a start later than the stop
// without being a rerun.
func (e *faultEnv) stoppedAgents(a *replicaProc) (groups, agents []int) {
	e.t.Helper()
	groups = waitForAgents(e.t, a)
	agents = a.agents()
	waitUntil(e.t, "every agent of the stopped replica logged its start", 2*time.Second, func() bool {
		started := map[int]bool{}
		for _, rs := range e.runs() {
			for _, r := range rs {
				started[r.pid] = true
			}
		}
		return !slices.ContainsFunc(agents, func(p int) bool { return !started[p] && running(p) })
	})
	return groups, agents
}
