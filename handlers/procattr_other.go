//go:build unix && !linux

package handlers

import "syscall"

// dieWithReplica has no portable equivalent outside Linux: there an agent
// may outlive a replica killed with SIGKILL (a graceful stop kills it).
func dieWithReplica(*syscall.SysProcAttr) {}
