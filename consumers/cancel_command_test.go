//go:build linux

package consumers_test

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/personaq/personaq/handlers"
	"github.com/personaq/personaq/schemas"
)

// A running command persona's whole process group gets SIGTERM (then
// SIGKILL after its kill grace): the agent and its children are gone.
func TestCancelRunningCommandWithChildren(t *testing.T) {
	t.Parallel()
	h := newHarness(t, true)
	outs := h.watchOutcomes()
	dir := t.TempDir()
	// The agent starts two children, notes its process group (its
	// supervisor leads it), and notes the SIGTERM it gets.
	script := `trap 'echo term > "$DIR/term"; exit 143' TERM
sleep 300 & sleep 300 &
cut -d' ' -f5 /proc/$$/stat > "$DIR/pid.tmp" && mv "$DIR/pid.tmp" "$DIR/pid"
wait`
	inv, err := handlers.NewCommand(handlers.CommandConfig{Path: "/bin/sh", Args: []string{"-c", script},
		Env: []string{"DIR=" + dir}, KillGrace: 500 * time.Millisecond})
	require.NoError(t, err)
	pol := fastPolicy(3)
	pol.AttemptTimeout = time.Minute
	h.start(persona("coder", inv, pol))
	req := h.publish("coder", "command")
	var pgid int
	require.Eventually(t, func() bool {
		b, err := os.ReadFile(filepath.Join(dir, "pid"))
		if err != nil {
			return false
		}
		pgid, err = strconv.Atoi(strings.TrimSpace(string(b)))
		return err == nil
	}, 10*time.Second, 10*time.Millisecond)
	require.Len(t, groupMembers(pgid), 4, "the supervisor, the agent and its two children run")
	t0 := time.Now()
	h.cancel(req, "stop the agent")
	require.Eventually(t, func() bool { return len(groupMembers(pgid)) == 0 }, 3*time.Second, 10*time.Millisecond,
		"processes of the agent's group outlived the cancel")
	t.Logf("cancel to last process of the group gone: %s", time.Since(t0))
	term, err := os.ReadFile(filepath.Join(dir, "term"))
	require.NoError(t, err, "the agent got SIGTERM first")
	require.Equal(t, "term\n", string(term))
	require.Equal(t, schemas.OutcomeCancelled, outs.wait(t, req.RequestID, 5*time.Second).Outcome)
	require.Eventually(t, func() bool { return h.requestsLeft() == 0 }, 5*time.Second, 10*time.Millisecond)
	require.Zero(t, h.quarantineCount())
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
		// state, ppid, pgrp follow the parenthesised command name.
		f := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
		if len(f) > 2 && f[0] != "Z" && f[2] == strconv.Itoa(pgid) {
			out = append(out, pid)
		}
	}
	return out
}
