//go:build integration

package integration

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/personaq/personaq/consumers/client"
)

// Agents never outlive their claim (the supervision scenarios): each
// command agent runs under a supervisor process that leads its group and
// kills it when its replica dies or freezes past the attempt's lease.

// A replica is SIGKILLed while its agents run (each with a child): one
// second later no process of any of their groups is alive, children
// included; the other replica reruns their requests.
func TestFaultKillReplicaLeavesNoAgentGroup(t *testing.T) {
	t.Parallel()
	e := newFaultEnv(t, 1)
	reps := e.replicas("groupkill", 2, 4)
	a := reps[0]
	reqs := e.requests("groupkill", 4, "long")
	e.publish(reqs...)
	waitUntil(t, "groupkill-1 running 2 agents", 30*time.Second, func() bool { return len(a.agents()) >= 2 })
	require.NoError(t, a.signal(syscall.SIGSTOP)) // no new agent between the listing and the kill
	groups := a.supervisors()
	// The agents run on while their replica is stopped: an agent listed
	// just after it started has its sleep child a moment later.
	waitUntil(t, "every agent group holds supervisor, agent and its sleep child", time.Second, func() bool {
		return !slices.ContainsFunc(groups, func(g int) bool { return len(groupMembers(g)) < 3 })
	})
	agents := a.agents()
	members := 0
	for _, g := range groups {
		members += len(groupMembers(g))
	}
	require.NoError(t, a.signal(syscall.SIGKILL))
	killedAt := time.Now()
	alive := func() bool { return slices.ContainsFunc(groups, func(g int) bool { return len(groupMembers(g)) > 0 }) }
	for alive() && time.Since(killedAt) < time.Second {
		time.Sleep(5 * time.Millisecond)
	}
	goneAfter := time.Since(killedAt)
	for _, g := range groups {
		require.Empty(t, groupMembers(g), "processes of agent group %d alive 1 s after its replica was SIGKILLed: %s", g, describe(groupMembers(g)))
	}
	a.kill() // reaped
	// An agent SIGKILLed before its SIGTERM trap wrote its end line ended
	// then at the latest.
	e.clipped(agents, killedAt.Add(goneAfter))
	res := e.check(reqs, 2*time.Minute)
	e.note("SIGKILL with %d agent groups (%d processes, children included) running: none alive %s after the kill",
		len(groups), members, goneAfter.Round(time.Millisecond))
	e.record(res)
}

// A replica alone is frozen (SIGSTOP of the replica process only, as a
// hung process or a partition would leave it) for 3×AckWait while its
// agents run work longer than that: the supervisors stop the agents and
// their children by the lease deadline, before the other replica starts
// the reruns (the run log's start and end lines show no overlap).
func TestFaultFrozenReplicaAloneStopsItsAgents(t *testing.T) {
	t.Parallel()
	e := newFaultEnv(t, 1)
	reps := e.replicas("alone", 2, 4)
	a := reps[0]
	reqs := e.requests("alone", 4, "long")
	e.publish(reqs...)
	waitUntil(t, "alone-1 running 2 agents", 30*time.Second, func() bool { return len(a.agents()) >= 2 })
	require.NoError(t, a.signal(syscall.SIGSTOP))
	stoppedAt := time.Now()
	groups, agents := e.stoppedAgents(a)
	held := e.requestsOf(agents)
	require.NotEmpty(t, held)
	waitUntil(t, "the frozen replica's agent groups gone", 2*faultAckWait, func() bool {
		return !slices.ContainsFunc(groups, func(g int) bool { return len(groupMembers(g)) > 0 })
	})
	goneAfter := time.Since(stoppedAt)
	// Killed at the lease deadline: an agent whose SIGTERM trap had not
	// written its end line by the SIGKILL ended then at the latest.
	e.clipped(agents, stoppedAt.Add(goneAfter))
	waitUntil(t, "frozen 3×AckWait and its requests rerun", 60*time.Second, func() bool {
		return time.Since(stoppedAt) >= 3*faultAckWait && e.rerunAfter(held, stoppedAt)
	})
	require.NoError(t, a.signal(syscall.SIGCONT))
	res := e.check(reqs, 2*time.Minute)
	e.note("replica alone frozen %s (AckWait %s) with %d agents: their groups gone %s after the freeze, before the reruns",
		(3 * faultAckWait).String(), faultAckWait, len(agents), goneAfter.Round(time.Millisecond))
	e.record(res)
}

// describe shows each pid's /proc stat line and command line.
func describe(pids []int) string {
	var b strings.Builder
	for _, p := range pids {
		stat, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p))
		cmd, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", p))
		fmt.Fprintf(&b, "\n%s  [%s]", strings.TrimSpace(string(stat)), strings.ReplaceAll(string(cmd), "\x00", " "))
	}
	return b.String()
}

// Requests are cancelled while the replica running them is frozen alone:
// each ends cancelled at once (its record), its agent and children are
// gone by the lease deadline although the frozen replica never saw the
// notice, and no other replica runs it again; when the replica wakes, its
// attempts settle nothing.
func TestFaultCancelWhileReplicaFrozen(t *testing.T) {
	t.Parallel()
	e := newFaultEnv(t, 1)
	reps := e.replicas("cancelfrozen", 2, 4)
	a := reps[0]
	reqs := e.requests("cancelfrozen", 4, "long")
	e.publish(reqs...)
	waitUntil(t, "cancelfrozen-1 running 2 agents", 30*time.Second, func() bool { return len(a.agents()) >= 2 })
	require.NoError(t, a.signal(syscall.SIGSTOP))
	stoppedAt := time.Now()
	groups, agents := e.stoppedAgents(a)
	held := e.requestsOf(agents)
	c, err := client.New(client.Config{JetStream: e.js})
	require.NoError(t, err)
	for _, r := range reqs {
		_, err := c.Cancel(e.ctx, r.RequestID, "cancelled while its replica is frozen", client.CancelledBy("fault test"))
		require.NoError(t, err)
	}
	waitUntil(t, "the frozen replica's agent groups gone", 2*faultAckWait, func() bool {
		return !slices.ContainsFunc(groups, func(g int) bool { return len(groupMembers(g)) > 0 })
	})
	goneAfter := time.Since(stoppedAt)
	// Killed at the lease deadline: an agent whose SIGTERM trap had not
	// written its end line by the SIGKILL ended then at the latest.
	e.clipped(agents, stoppedAt.Add(goneAfter))
	time.Sleep(3 * faultAckWait) // long enough for a rerun, which must not come
	require.NoError(t, a.signal(syscall.SIGCONT))
	res := e.check(reqs, 2*time.Minute)
	runs := e.runs()
	for _, id := range held {
		for _, r := range runs[id] {
			again := r.start.After(stoppedAt) && !slices.Contains(agents, r.pid)
			require.False(t, again, "cancelled request %s ran again after the cancel (pid %d, frozen replica's agents %v)", id, r.pid, agents)
		}
	}
	require.Equal(t, len(reqs), res.outcomes["cancelled"])
	e.note("%d requests cancelled while %d of them ran on a replica frozen alone: agents gone %s after the freeze, none rerun",
		len(reqs), len(held), goneAfter.Round(time.Millisecond))
	e.record(res)
}
