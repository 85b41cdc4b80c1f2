//go:build linux

package handlers_test

import (
	"bytes"
	"context"
	"errors"
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
	"github.com/personaq/personaq/schemas"
)

const replicaEnv = "PERSONAQ_TEST_REPLICA_PIDFILE"

// A replica killed with SIGKILL while its command persona runs leaves no
// agent behind: the agent gets the parent-death signal. The replica is
// this test binary re-executed; its agent writes its pid and sleeps.
func TestAgentDiesWithItsReplica(t *testing.T) {
	if pidFile := os.Getenv(replicaEnv); pidFile != "" {
		runReplica(pidFile)
		return
	}
	t.Parallel()
	pidFile := filepath.Join(t.TempDir(), "agent.pid")
	replica := exec.Command(os.Args[0], "-test.run=^TestAgentDiesWithItsReplica$")
	replica.Env = append(os.Environ(), replicaEnv+"="+pidFile)
	var out bytes.Buffer
	replica.Stdout, replica.Stderr = &out, &out
	require.NoError(t, replica.Start())
	var agent int
	require.Eventually(t, func() bool {
		b, err := os.ReadFile(pidFile)
		if err != nil || !bytes.HasSuffix(b, []byte("\n")) {
			return false
		}
		agent, err = strconv.Atoi(strings.TrimSpace(string(b)))
		return err == nil
	}, 10*time.Second, 10*time.Millisecond, "agent never started: %s", &out)
	require.True(t, alive(agent))

	require.NoError(t, replica.Process.Signal(syscall.SIGKILL))
	_ = replica.Wait()
	require.Eventually(t, func() bool { return !alive(agent) }, 5*time.Second, 10*time.Millisecond,
		"agent %d outlived its replica", agent)
}

// runReplica runs one attempt of a command persona whose agent never ends.
func runReplica(pidFile string) {
	inv, err := handlers.NewCommand(handlers.CommandConfig{
		Path: "/bin/sh", Args: []string{"-c", `echo $$ > "$PIDFILE.tmp" && mv "$PIDFILE.tmp" "$PIDFILE" && exec sleep 300`},
		Env: []string{"PIDFILE=" + pidFile},
	})
	if err != nil {
		panic(err)
	}
	req := &handlers.Request{Message: schemas.NewRequest("t-orphan", "main", "agent"), Attempt: 1}
	_, _ = inv.Handle(context.Background(), req)
}

// alive reports whether pid runs (a zombie waiting to be reaped does not).
func alive(pid int) bool {
	if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
		return false
	}
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	// The state follows the parenthesised command name.
	fields := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
	return len(fields) > 0 && fields[0] != "Z"
}
