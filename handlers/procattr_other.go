//go:build unix && !linux

package handlers

import "syscall"

// dieWithReplica has no portable equivalent outside Linux: there an agent
// started without its supervisor may outlive a replica killed with SIGKILL
// (a graceful stop kills it).
func dieWithReplica(*syscall.SysProcAttr) {}

// killGroupMembers has no portable way to list a process group outside
// Linux: what the agent left behind is killed by the replica's group kill.
func killGroupMembers() {}
