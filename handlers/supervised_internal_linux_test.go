//go:build linux

package handlers

import (
	"os"
	"os/exec"
	"sync/atomic"
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

// A renewal made while the supervisor is still starting reaches it in
// time: the deadline is fed from the supervisor's start, not from the
// agent's, and the supervisor acts on the latest deadline that has
// arrived. Primed with a deadline whose SIGTERM is due before the
// supervisor can have booted, and renewed at once, the agent lives on.
// (When the feed began only once the agent ran, as on a loaded machine
// in the fault suite, the supervisor stopped it at the primed deadline.)
func TestSupervisorTakesRenewalsMadeWhileItStarts(t *testing.T) {
	t.Parallel()
	cmd := exec.Command("/bin/sh", "-c", "sleep 300")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	const grace = 100 * time.Millisecond
	sup, err := supervise(cmd, grace)
	require.NoError(t, err)
	require.NotNil(t, sup, "this test binary supervises its agents")
	primed, renewed := time.Now().Add(grace+time.Millisecond), time.Now().Add(time.Minute)
	var calls atomic.Int32
	deadline := func() time.Time {
		if calls.Add(1) == 1 {
			return primed
		}
		return renewed
	}
	require.NoError(t, sup.launch(cmd, "/bin/sh", deadline))
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		sup.end()
	})
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	select {
	case err := <-exited:
		t.Fatalf("the agent was stopped at the primed deadline, renewed before the supervisor read it: %v", err)
	case <-time.After(time.Second):
	}
}

// Deadlines that arrive together are one update: the supervisor is given
// the latest alone, never an earlier one to act on first.
func TestReadControlPassesTheLatestOfWhatArrived(t *testing.T) {
	t.Parallel()
	r, w, err := os.Pipe()
	require.NoError(t, err)
	_, err = w.WriteString("d 1000\nd 2000\nnot a deadline\nd 3000\n")
	require.NoError(t, err)
	deadlines, gone := make(chan time.Time, 1), make(chan struct{})
	go readControl(r, deadlines, gone)
	require.Equal(t, time.Unix(0, 3000), <-deadlines)
	_, err = w.WriteString("d 4000\n")
	require.NoError(t, err)
	require.Equal(t, time.Unix(0, 4000), <-deadlines)
	require.NoError(t, w.Close())
	<-gone
	select {
	case d := <-deadlines:
		t.Fatalf("passed on %v as well", d)
	default:
	}
	_ = r.Close()
}
