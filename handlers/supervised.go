//go:build unix

package handlers

import (
	"bufio"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// selfPath is this binary, which supervises agents when re-executed; empty
// when it cannot be found (agents then run unsupervised, with only the
// parent-death signal).
var selfPath = sync.OnceValue(func() string {
	p, err := os.Executable()
	if err != nil {
		return ""
	}
	return p
})

// feedEvery is how often the replica side passes a moved lease deadline on
// to the supervisor.
const feedEvery = 100 * time.Millisecond

// supervision is the replica's end of one supervised agent.
type supervision struct {
	control *os.File // write end of fd 3
	status  *os.File // read end of fd 4
	// child ends, closed once the supervisor has started
	childControl, childStatus *os.File
	stop                      chan struct{}
	stopped                   sync.WaitGroup
}

// supervise turns cmd (the agent) into the command that runs its
// supervisor, which runs the agent. The agent's path is resolved here, as
// exec.Command would.
func supervise(cmd *exec.Cmd, grace time.Duration) (*supervision, error) {
	self := selfPath()
	if self == "" {
		return nil, nil
	}
	if cmd.Err != nil {
		return nil, cmd.Err
	}
	s := &supervision{stop: make(chan struct{})}
	var err error
	if s.childControl, s.control, err = os.Pipe(); err != nil {
		return nil, err
	}
	if s.status, s.childStatus, err = os.Pipe(); err != nil {
		s.closeAll()
		return nil, err
	}
	cmd.Args = append([]string{self, cmd.Path}, cmd.Args[1:]...)
	cmd.Path = self
	cmd.Env = append(cmd.Env, superviseEnv+"="+strconv.FormatInt(int64(grace), 10))
	cmd.ExtraFiles = []*os.File{s.childControl, s.childStatus}
	return s, nil
}

// started reads whether the supervisor started the agent (after
// cmd.Start): nil, or why the agent could not start.
func (s *supervision) started(path string) error {
	_ = s.childControl.Close()
	_ = s.childStatus.Close()
	line, err := bufio.NewReader(s.status).ReadString('\n')
	_ = s.status.Close()
	if err != nil {
		return fmt.Errorf("agent supervisor exited before starting %s: %w", path, err)
	}
	f := strings.SplitN(strings.TrimSpace(line), " ", 3)
	if len(f) >= 2 && f[0] == "ok" {
		return nil
	}
	if len(f) == 3 && f[0] == "err" {
		if n, _ := strconv.Atoi(f[1]); n != 0 {
			return &fs.PathError{Op: "fork/exec", Path: path, Err: syscall.Errno(n)}
		}
		return fmt.Errorf("%s", f[2])
	}
	return fmt.Errorf("agent supervisor: unexpected status %q", line)
}

// launch starts cmd, the supervisor, and returns once the agent runs (or
// why it could not start). The lease deadline is written before the
// supervisor starts (prime) and fed from then on, not from the agent's
// start: on a loaded machine, starting the supervisor and the agent can
// outlast the primed deadline, and the renewals made meanwhile must be in
// the control pipe when the supervisor first reads it.
func (s *supervision) launch(cmd *exec.Cmd, agent string, deadline func() time.Time) error {
	primed := s.prime(deadline)
	if err := cmd.Start(); err != nil {
		s.closeAll()
		return err
	}
	s.feed(deadline, primed)
	if err := s.started(agent); err != nil {
		s.end()
		_ = cmd.Wait()
		s.closeAll()
		return err
	}
	return nil
}

// prime writes the attempt's lease deadline into the control pipe before
// the supervisor starts (the pipe holds it until read), and returns what
// it wrote: the agent then never runs without a deadline, even when this
// replica freezes between starting it and feed's first send.
func (s *supervision) prime(deadline func() time.Time) time.Time {
	if deadline == nil {
		return time.Time{}
	}
	d := deadline()
	if d.IsZero() {
		return d
	}
	if _, err := fmt.Fprintf(s.control, "d %d\n", d.UnixNano()); err != nil {
		return time.Time{}
	}
	return d
}

// feed passes the attempt's lease deadline on to the supervisor as it
// moves, until end; sent is the deadline prime wrote. deadline nil: no
// lease (the supervisor then only watches for the replica's death).
func (s *supervision) feed(deadline func() time.Time, sent time.Time) {
	if deadline == nil {
		return
	}
	s.stopped.Go(func() {
		t := time.NewTicker(feedEvery)
		defer t.Stop()
		for {
			if d := deadline(); !d.IsZero() && !d.Equal(sent) {
				if _, err := fmt.Fprintf(s.control, "d %d\n", d.UnixNano()); err != nil {
					return
				}
				sent = d
			}
			select {
			case <-s.stop:
				return
			case <-t.C:
			}
		}
	})
}

// end stops feeding and closes the control pipe.
func (s *supervision) end() {
	close(s.stop)
	s.stopped.Wait()
	_ = s.control.Close()
}

func (s *supervision) closeAll() {
	for _, f := range []*os.File{s.control, s.status, s.childControl, s.childStatus} {
		if f != nil {
			_ = f.Close()
		}
	}
}
