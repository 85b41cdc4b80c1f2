//go:build linux

package handlers

import "syscall"

// dieWithReplica asks the kernel to SIGKILL the agent when the replica
// process that started it dies (PR_SET_PDEATHSIG), so a replica killed with
// SIGKILL leaves no agent running beside the rerun of its request on
// another replica. It covers the agent process itself; what the agent
// spawns dies with it only if it exec's into it or does the same.
func dieWithReplica(a *syscall.SysProcAttr) { a.Pdeathsig = syscall.SIGKILL }
