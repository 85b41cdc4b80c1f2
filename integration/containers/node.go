package containers

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"
	"github.com/testcontainers/testcontainers-go"
)

// DefaultStopTimeout is how long Stop waits after SIGTERM before Docker
// sends SIGKILL.
const DefaultStopTimeout = 30 * time.Second

// Node is one container started by this package. NATS, Redis and Replica
// embed it; its methods are safe to call from several goroutines.
type Node struct {
	alias       string
	addr        string // fixed address on its network, if any
	ctr         testcontainers.Container
	volume      string // named volume removed by Terminate, if any
	stopTimeout time.Duration

	mu     sync.Mutex
	starts int // how many times the container was started
}

// Container is the underlying testcontainers container.
func (n *Node) Container() testcontainers.Container { return n.ctr }

// Alias is the container's name on its network.
func (n *Node) Alias() string { return n.alias }

// ID is the Docker container id.
func (n *Node) ID() string { return n.ctr.GetContainerID() }

// Starts counts how many times the container has been started.
func (n *Node) Starts() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.starts
}

func (n *Node) started() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.starts++
	return n.starts
}

// Stop stops the container the way `docker stop` does: SIGTERM, then
// SIGKILL if it is still running after the stop timeout.
func (n *Node) Stop(ctx context.Context) error {
	d := n.stopTimeout
	if d == 0 {
		d = DefaultStopTimeout
	}
	if err := n.ctr.Stop(ctx, &d); err != nil {
		return fmt.Errorf("stop %s: %w", n.alias, err)
	}
	return nil
}

// Kill sends SIGKILL, like a crash or the OOM killer, and waits until the
// container has exited.
func (n *Node) Kill(ctx context.Context) error {
	cli, err := docker(ctx)
	if err != nil {
		return err
	}
	if _, err := cli.ContainerKill(ctx, n.ID(), client.ContainerKillOptions{Signal: "KILL"}); err != nil {
		return fmt.Errorf("kill %s: %w", n.alias, err)
	}
	for {
		running, err := n.Running(ctx)
		if err != nil || !running {
			return err
		}
		if err := sleep(ctx, 20*time.Millisecond); err != nil {
			return fmt.Errorf("kill %s: still running: %w", n.alias, err)
		}
	}
}

// Running reports whether the container's process is running.
func (n *Node) Running(ctx context.Context) (bool, error) {
	st, err := n.ctr.State(ctx)
	if err != nil {
		return false, fmt.Errorf("state of %s: %w", n.alias, err)
	}
	return st.Running, nil
}

// ExitCode is the exit code of the container's last run; an error while it
// is running.
func (n *Node) ExitCode(ctx context.Context) (int, error) {
	st, err := n.ctr.State(ctx)
	if err != nil {
		return 0, fmt.Errorf("state of %s: %w", n.alias, err)
	}
	if st.Running {
		return 0, fmt.Errorf("%s is still running", n.alias)
	}
	return st.ExitCode, nil
}

// start starts the stopped container (the caller waits for readiness).
func (n *Node) start(ctx context.Context) error {
	if err := n.ctr.Start(ctx); err != nil {
		return fmt.Errorf("start %s: %w", n.alias, err)
	}
	n.started()
	return nil
}

// Logs returns everything the container wrote to stdout and stderr, over
// all of its runs.
func (n *Node) Logs(ctx context.Context) (string, error) {
	rc, err := n.ctr.Logs(ctx)
	if err != nil {
		return "", fmt.Errorf("logs of %s: %w", n.alias, err)
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		return string(b), fmt.Errorf("logs of %s: %w", n.alias, err)
	}
	return string(b), nil
}

// IP is the container's address on nw: the fixed one it was given when it
// joined nw (also while it is stopped), else what Docker reports (empty
// while it is not running).
func (n *Node) IP(ctx context.Context, nw *Network) (string, error) {
	if n.addr != "" {
		return n.addr, nil
	}
	info, err := n.ctr.Inspect(ctx)
	if err != nil {
		return "", fmt.Errorf("inspect %s: %w", n.alias, err)
	}
	if ep, ok := info.NetworkSettings.Networks[nw.Name]; ok && ep.IPAddress.IsValid() {
		return ep.IPAddress.String(), nil
	}
	return "", nil
}

// Terminate removes the container and its volume. It is idempotent.
func (n *Node) Terminate(ctx context.Context) error {
	if n == nil || n.ctr == nil {
		return nil
	}
	var opts []testcontainers.TerminateOption
	opts = append(opts, testcontainers.StopTimeout(5*time.Second))
	if n.volume != "" {
		opts = append(opts, testcontainers.RemoveVolumes(n.volume))
	}
	err := n.ctr.Terminate(ctx, opts...)
	if err != nil && strings.Contains(err.Error(), "No such container") {
		err = nil
	}
	return err
}

// waitLog waits until the logs hold at least count occurrences of line,
// failing early with the log tail if the container exits.
func (n *Node) waitLog(ctx context.Context, line string, count int, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		logs, err := n.Logs(ctx)
		if err == nil && strings.Count(logs, line) >= count {
			return nil
		}
		if running, serr := n.Running(ctx); serr == nil && !running {
			code, _ := n.ExitCode(ctx)
			return fmt.Errorf("%s exited (code %d) before logging %q; last output:\n%s", n.alias, code, line, Tail(logs, 30))
		}
		if err := sleep(ctx, 100*time.Millisecond); err != nil {
			return fmt.Errorf("%s did not log %q within %s; last output:\n%s", n.alias, line, timeout, Tail(logs, 30))
		}
	}
}

// Tail returns the last n lines of s.
func Tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// freePort returns a TCP port free on 127.0.0.1 right now.
func freePort() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("free port: %w", err)
	}
	defer l.Close()
	return strconv.Itoa(l.Addr().(*net.TCPAddr).Port), nil
}

// createVolume makes a labelled named volume.
func createVolume(ctx context.Context, name string) error {
	cli, err := docker(ctx)
	if err != nil {
		return err
	}
	_, err = cli.VolumeCreate(ctx, client.VolumeCreateOptions{Name: name, Labels: map[string]string{Label: "true"}})
	if err != nil {
		return fmt.Errorf("create volume %s: %w", name, err)
	}
	return nil
}

func removeVolume(ctx context.Context, name string) {
	if cli, err := docker(ctx); err == nil {
		_, _ = cli.VolumeRemove(ctx, name, client.VolumeRemoveOptions{Force: true})
	}
}

// Memory is what the container's memory cgroup reports, from the engine's
// stats: Usage (with the page cache), its peak MaxUsage (cgroup v1 only; 0
// on v2), and Anon, the processes' own memory (rss on v1, anon on v2), the
// figure comparable to a process's RSS. CPU is the CPU time its
// processes have used since it started.
type Memory struct {
	Usage, MaxUsage, Anon uint64
	CPU                   time.Duration
}

// Memory reads the container's memory figures once.
func (n *Node) Memory(ctx context.Context) (Memory, error) {
	cli, err := docker(ctx)
	if err != nil {
		return Memory{}, err
	}
	res, err := cli.ContainerStats(ctx, n.ID(), client.ContainerStatsOptions{})
	if err != nil {
		return Memory{}, fmt.Errorf("stats of %s: %w", n.alias, err)
	}
	defer res.Body.Close()
	var st container.StatsResponse
	if err := json.NewDecoder(res.Body).Decode(&st); err != nil {
		return Memory{}, fmt.Errorf("stats of %s: %w", n.alias, err)
	}
	m := st.MemoryStats
	anon, ok := m.Stats["rss"]
	if !ok {
		anon = m.Stats["anon"]
	}
	cpu := time.Duration(st.CPUStats.CPUUsage.TotalUsage) // nanoseconds
	return Memory{Usage: m.Usage, MaxUsage: m.MaxUsage, Anon: anon, CPU: cpu}, nil
}

// OOMKilled reports whether the kernel killed the container's process for
// going over its memory limit.
func (n *Node) OOMKilled(ctx context.Context) (bool, error) {
	st, err := n.ctr.State(ctx)
	if err != nil {
		return false, fmt.Errorf("state of %s: %w", n.alias, err)
	}
	return st.OOMKilled, nil
}
