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
	frozen := a.agents()
	for _, pid := range frozen {
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
