//go:build linux

package handlers

import (
	"bytes"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// dieWithReplica asks the kernel to SIGKILL the agent when the replica
// process that started it dies (PR_SET_PDEATHSIG). Only an agent started
// without its supervisor (this binary's path unknown) uses it: it covers
// the agent process itself, not what the agent spawns.
func dieWithReplica(a *syscall.SysProcAttr) { a.Pdeathsig = syscall.SIGKILL }

// killGroupMembers SIGKILLs every other live process of the caller's
// process group (the supervisor's: what the agent left behind), reading
// /proc until none is left.
func killGroupMembers() {
	self := os.Getpid()
	pg := strconv.Itoa(syscall.Getpgrp())
	for range 10 {
		left := 0
		entries, _ := os.ReadDir("/proc")
		for _, e := range entries {
			pid, err := strconv.Atoi(e.Name())
			if err != nil || pid == self {
				continue
			}
			stat, err := os.ReadFile("/proc/" + e.Name() + "/stat")
			if err != nil {
				continue
			}
			// state, ppid, pgrp follow the parenthesised command name.
			f := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
			if len(f) > 2 && f[0] != "Z" && f[2] == pg {
				_ = syscall.Kill(pid, syscall.SIGKILL)
				left++
			}
		}
		if left == 0 {
			return
		}
	}
}
