//go:build unix

package handlers

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// An agent's supervisor is this same binary, re-executed with superviseEnv
// set: its package init runs the supervisor instead of the program (so any
// binary that links this package can supervise, test binaries included).
// It sits between the replica and the agent, leads the agent's process
// group, and outlives a replica that dies or freezes:
//
//	fd 3  control, replica → supervisor: "d <unix ns>" lines, the time by
//	      which the agent must be gone (the attempt's lease deadline, sent
//	      again at each renewal); EOF: the replica is gone.
//	fd 4  status, supervisor → replica: "ok <pid>" once the agent runs, or
//	      "err <errno> <text>" when it could not start.
//
// At the deadline minus the kill grace the group gets SIGTERM, at the
// deadline SIGKILL (the supervisor with it): a replica frozen past its
// lease leaves nothing running when another replica starts the rerun. On
// EOF the group gets SIGTERM, then SIGKILL after at most goneGrace. When
// the agent exits, what it left in the group is killed and the supervisor
// exits as the agent did. Signals sent to the group (the replica's own
// stop) reach the agent directly; the supervisor only waits.
const superviseEnv = "PERSONAQ_SUPERVISE_KILL_GRACE_NS"

// goneGrace bounds the grace an agent gets once its replica is gone.
const goneGrace = 500 * time.Millisecond

// supervisorExit is the supervisor's exit code when it cannot run at all.
const supervisorExit = 126

func init() {
	if v, ok := os.LookupEnv(superviseEnv); ok {
		os.Exit(runSupervisor(v, os.Args[1:]))
	}
}

func runSupervisor(graceNs string, argv []string) int {
	n, err := strconv.ParseInt(graceNs, 10, 64)
	if err != nil || len(argv) == 0 {
		fmt.Fprintf(os.Stderr, "personaq supervisor: bad invocation (%s=%q, %d args)\n", superviseEnv, graceNs, len(argv))
		return supervisorExit
	}
	ctl, status := os.NewFile(3, "control"), os.NewFile(4, "status")
	// Caught, not ignored: an ignored signal would stay ignored in the agent.
	signal.Notify(make(chan os.Signal, 1), syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	agent := exec.Command(argv[0], argv[1:]...)
	agent.Stdin, agent.Stdout, agent.Stderr = os.Stdin, os.Stdout, os.Stderr
	agent.Env = withoutEnv(os.Environ(), superviseEnv)
	if err := agent.Start(); err != nil {
		var errno syscall.Errno
		errors.As(err, &errno)
		fmt.Fprintf(status, "err %d %s\n", int(errno), err)
		return supervisorExit
	}
	fmt.Fprintf(status, "ok %d\n", agent.Process.Pid)
	_ = status.Close()
	return watchAgent(agent, ctl, time.Duration(n))
}

// watchAgent waits for the agent, enforcing the deadlines the replica
// sends and stopping the group when the replica is gone.
func watchAgent(agent *exec.Cmd, ctl *os.File, grace time.Duration) int {
	exited := make(chan struct{})
	go func() { _ = agent.Wait(); close(exited) }()
	deadlines, gone := make(chan time.Time, 1), make(chan struct{})
	go readControl(ctl, deadlines, gone)
	term, kill := stoppedTimer(), stoppedTimer()
	for {
		select {
		case <-exited:
			killGroupMembers()
			return exitAs(agent.ProcessState)
		case d := <-deadlines:
			term.Reset(time.Until(d.Add(-grace)))
			kill.Reset(time.Until(d))
		case <-term.C:
			signalGroup(os.Getpid(), syscall.SIGTERM)
		case <-kill.C:
			signalGroup(os.Getpid(), syscall.SIGKILL)
		case <-gone:
			gone = nil
			signalGroup(os.Getpid(), syscall.SIGTERM)
			kill.Reset(min(grace, goneGrace))
		}
	}
}

func stoppedTimer() *time.Timer {
	t := time.NewTimer(time.Hour)
	t.Stop()
	return t
}

// readControl passes on the latest deadline of the lines that have
// arrived; it closes gone at EOF. Lines read together are one update: the
// first read takes the primed deadline with the renewals written while
// this supervisor started, and acting on the primed one alone could stop
// the agent at a deadline already renewed.
func readControl(ctl io.Reader, deadlines chan time.Time, gone chan<- struct{}) {
	defer close(gone)
	r := bufio.NewReader(ctl)
	var latest time.Time
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			return
		}
		if d, ok := parseDeadline(line); ok {
			latest = d
		}
		if latest.IsZero() || r.Buffered() > 0 {
			continue // a later line has arrived with this one
		}
		select { // only the latest deadline matters
		case <-deadlines:
		default:
		}
		deadlines <- latest
		latest = time.Time{}
	}
}

// parseDeadline reads a control line, "d <unix ns>".
func parseDeadline(line string) (time.Time, bool) {
	f := strings.Fields(line)
	if len(f) != 2 || f[0] != "d" {
		return time.Time{}, false
	}
	ns, err := strconv.ParseInt(f[1], 10, 64)
	if err != nil {
		return time.Time{}, false
	}
	return time.Unix(0, ns), true
}

// exitAs exits the way the agent did: its code, or its signal re-raised.
// The Go runtime ignores a SIGPIPE sent with kill (it acts only on a write
// to a closed stdout or stderr), so a signal that does not end the process
// at once is followed by SIGKILL: the replica still sees a signal (the same
// class of failure), and the supervisor never lingers after its agent —
// an agent writing to the stdout of a replica just killed dies of SIGPIPE.
func exitAs(st *os.ProcessState) int {
	ws, ok := st.Sys().(syscall.WaitStatus)
	if ok && ws.Signaled() {
		signal.Reset(ws.Signal())
		_ = syscall.Kill(os.Getpid(), ws.Signal())
		time.Sleep(50 * time.Millisecond) // a fatal signal ends the process here
		_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
		select {}
	}
	return st.ExitCode()
}

func withoutEnv(env []string, key string) []string {
	out := env[:0:0]
	for _, kv := range env {
		if !strings.HasPrefix(kv, key+"=") {
			out = append(out, kv)
		}
	}
	return out
}
