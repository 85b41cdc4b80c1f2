//go:build linux

package handlers_test

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/personaq/personaq/handlers"
	"github.com/personaq/personaq/retry"
	"github.com/personaq/personaq/schemas"
)

const (
	supReplicaEnv = "PERSONAQ_TEST_SUPERVISED_REPLICA_DIR"
	supLeaseEnv   = "PERSONAQ_TEST_SUPERVISED_LEASE"
)

// agentScript starts two children, then notes its process group.
const agentScript = `sleep 300 & sleep 300 &
ps_pgid=$(cut -d' ' -f5 /proc/$$/stat)
echo $ps_pgid > "$DIR/pgid.tmp" && mv "$DIR/pgid.tmp" "$DIR/pgid"
wait`

// A replica killed with SIGKILL leaves nothing of its agent's group
// running a second later: the supervisor sees the control pipe close.
func TestSupervisorStopsAgentGroupWhenReplicaDies(t *testing.T) {
	if dir := os.Getenv(supReplicaEnv); dir != "" {
		runSupervisedReplica(dir, 0)
		return
	}
	t.Parallel()
	replica, pgid := startSupervisedReplica(t, "^TestSupervisorStopsAgentGroupWhenReplicaDies$", "")
	require.Len(t, groupMembers(pgid), 4, "supervisor, agent and two children")
	require.NoError(t, replica.Process.Signal(syscall.SIGSTOP)) // a replica killed while frozen, too
	require.NoError(t, replica.Process.Signal(syscall.SIGKILL))
	_ = replica.Wait()
	require.Eventually(t, func() bool { return len(groupMembers(pgid)) == 0 }, time.Second, 10*time.Millisecond,
		"processes of the agent's group alive 1 s after its replica died: %v", groupMembers(pgid))
}

// A replica frozen (SIGSTOP) stops renewing its lease; its agent's group
// is gone by the lease deadline it last sent, while the replica is still
// frozen.
func TestSupervisorStopsAgentGroupWhenReplicaFreezes(t *testing.T) {
	if dir := os.Getenv(supReplicaEnv); dir != "" {
		runSupervisedReplica(dir, 1500*time.Millisecond)
		return
	}
	t.Parallel()
	replica, pgid := startSupervisedReplica(t, "^TestSupervisorStopsAgentGroupWhenReplicaFreezes$", "1")
	t.Cleanup(func() { _ = replica.Process.Kill(); _ = replica.Wait() })
	time.Sleep(500 * time.Millisecond) // a few renewals go out
	require.Len(t, groupMembers(pgid), 4)
	frozenAt := time.Now()
	require.NoError(t, replica.Process.Signal(syscall.SIGSTOP))
	// The lease deadline was at most 1.5 s ahead when the replica froze; the
	// supervisor acting on it may itself be late on a loaded machine (200 ms
	// of slack was overrun at nice 10 beside a CPU hog). The replica stays
	// frozen, so only the supervisor can end the group.
	require.Eventually(t, func() bool { return len(groupMembers(pgid)) == 0 }, 1500*time.Millisecond+3*time.Second, 10*time.Millisecond,
		"processes of the agent's group outlived the lease of a frozen replica: %v", groupMembers(pgid))
	t.Logf("frozen to group gone: %s", time.Since(frozenAt))
	st, err := os.ReadFile("/proc/" + strconv.Itoa(replica.Process.Pid) + "/stat")
	require.NoError(t, err)
	require.Contains(t, string(st[bytes.LastIndexByte(st, ')'):]), ") T ", "the replica is still frozen")
}

func startSupervisedReplica(t *testing.T, run, lease string) (*exec.Cmd, int) {
	t.Helper()
	dir := t.TempDir()
	replica := exec.Command(os.Args[0], "-test.run="+run)
	replica.Env = append(os.Environ(), supReplicaEnv+"="+dir, supLeaseEnv+"="+lease)
	var out bytes.Buffer
	replica.Stdout, replica.Stderr = &out, &out
	require.NoError(t, replica.Start())
	var pgid int
	require.Eventually(t, func() bool {
		b, err := os.ReadFile(filepath.Join(dir, "pgid"))
		if err != nil {
			return false
		}
		pgid, err = strconv.Atoi(strings.TrimSpace(string(b)))
		return err == nil
	}, 10*time.Second, 10*time.Millisecond, "agent never started: %s", &out)
	return replica, pgid
}

// runSupervisedReplica runs one attempt of a command persona whose agent
// never ends; with ttl, under a lease renewed every ttl/3 (as the lease
// keeper does), whose deadline it passes on.
func runSupervisedReplica(dir string, ttl time.Duration) {
	inv, err := handlers.NewCommand(handlers.CommandConfig{Path: "/bin/sh", Args: []string{"-c", agentScript},
		Env: []string{"DIR=" + dir}, KillGrace: 300 * time.Millisecond})
	if err != nil {
		panic(err)
	}
	req := &handlers.Request{Message: schemas.NewRequest("t-supervised", "main", "agent"), Attempt: 1}
	if ttl > 0 {
		req.LeaseDeadline = func() time.Time { return time.Now().Truncate(ttl / 3).Add(ttl) }
	}
	_, _ = inv.Handle(context.Background(), req)
}

// groupMembers lists the live (not zombie) processes of process group pgid.
func groupMembers(pgid int) []int {
	entries, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		f := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
		if len(f) > 2 && f[0] != "Z" && f[2] == strconv.Itoa(pgid) {
			out = append(out, pid)
		}
	}
	return out
}

// An agent ended by a signal the Go runtime does not act on when sent with
// kill (SIGPIPE: an agent writing to the stdout of a replica just killed)
// still ends its supervisor by a signal, at once: the failure is retryable
// like any agent killed from outside, not an exit code the policy treats
// as terminal.
func TestSupervisedAgentKilledBySIGPIPEIsASignal(t *testing.T) {
	t.Parallel()
	inv, err := handlers.NewCommand(handlers.CommandConfig{Path: "/bin/sh", Args: []string{"-c", "kill -PIPE $$"}})
	require.NoError(t, err)
	req := &handlers.Request{Message: schemas.NewRequest("t-sigpipe", "main", "agent"), Attempt: 1}
	_, err = inv.Handle(context.Background(), req)
	var exit *handlers.ExitError
	require.ErrorAs(t, err, &exit)
	require.NotZero(t, exit.Signal, "ended by a signal, not exit code %d", exit.Code)
	require.Equal(t, retry.ClassRetryable, handlers.Classify(err).Class, "%v", err)
}
