//go:build linux

package handlers

import (
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A replica that freezes right after starting its agent, before feed
// sends anything, still leaves the supervisor a deadline: the one prime
// wrote into the control pipe before the supervisor started. Without it
// the agent would run until the replica woke. Here feed never runs at all.
func TestSupervisorHasTheDeadlineBeforeTheAgentStarts(t *testing.T) {
	t.Parallel()
	cmd := exec.Command("/bin/sh", "-c", "sleep 300")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	sup, err := supervise(cmd, 100*time.Millisecond)
	require.NoError(t, err)
	require.NotNil(t, sup, "this test binary supervises its agents")
	deadline := time.Now().Add(500 * time.Millisecond)
	require.Equal(t, deadline, sup.prime(func() time.Time { return deadline }))
	require.NoError(t, cmd.Start())
	require.NoError(t, sup.started("/bin/sh"))
	t.Cleanup(func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) })

	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	select {
	case err := <-exited:
		// The supervisor ends with its group at the deadline.
		require.Error(t, err)
		require.WithinDuration(t, deadline, time.Now(), 3*time.Second)
	case <-time.After(500*time.Millisecond + 5*time.Second):
		t.Fatal("the agent outlived the primed deadline with no feed")
	}
	_ = sup.control.Close()
}
