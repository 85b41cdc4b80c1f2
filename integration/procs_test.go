//go:build integration

package integration

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// The fault suite (faults_test.go) runs real processes, no containers:
// `personaq serve` replicas and nats-server, both built once from this
// module, and Debian's redis-server (integration/testenv). A fault is a
// signal to a process: SIGSTOP/SIGCONT, SIGKILL.

// bins holds the binaries built once per test binary, on first use.
var bins struct {
	once              sync.Once
	personaq, natsSrv string
	err               error
}

// binaries builds personaq and nats-server (the version go.mod pins) into a
// temporary directory, once.
func binaries(t *testing.T) (personaq, natsServer string) {
	t.Helper()
	bins.once.Do(func() {
		dir, err := os.MkdirTemp("", "personaq-faults-bin-")
		if err != nil {
			bins.err = err
			return
		}
		bins.personaq, bins.natsSrv = filepath.Join(dir, "personaq"), filepath.Join(dir, "nats-server")
		for _, b := range []struct{ out, pkg string }{
			{bins.personaq, "github.com/personaq/personaq/cmd/personaq"},
			{bins.natsSrv, "github.com/nats-io/nats-server/v2"},
		} {
			cmd := exec.Command("go", "build", "-trimpath", "-o", b.out, b.pkg) // the flags images/build.sh uses: a shared build cache
			cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
			if out, err := cmd.CombinedOutput(); err != nil {
				bins.err = fmt.Errorf("go build %s: %w\n%s", b.pkg, err, out)
				return
			}
		}
	})
	if bins.err != nil {
		t.Fatalf("fault suite: %v", bins.err)
	}
	return bins.personaq, bins.natsSrv
}

// freeLoopbackPort returns a TCP port free on 127.0.0.1 right now.
func freeLoopbackPort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("free port: %v", err)
	}
	defer func() { _ = l.Close() }()
	return l.Addr().(*net.TCPAddr).Port
}

// proc is a child process the test may signal. Children get SIGKILL when
// the test process dies (parent-death signal), so nothing outlives a run.
type proc struct {
	name string
	args []string
	log  string // stdout and stderr, appended across restarts

	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan struct{}
}

func (p *proc) start() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	f, err := os.OpenFile(p.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	cmd := exec.Command(p.args[0], p.args[1:]...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		_ = f.Close()
		return fmt.Errorf("start %s: %w", p.name, err)
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		_ = f.Close()
		close(exited)
	}()
	p.cmd, p.exited = cmd, exited
	return nil
}

func (p *proc) pid() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cmd.Process.Pid
}

func (p *proc) signal(sig syscall.Signal) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.cmd.Process.Signal(sig); err != nil {
		return fmt.Errorf("%s: signal %v: %w", p.name, sig, err)
	}
	return nil
}

// kill SIGKILLs the process and waits until it is gone.
func (p *proc) kill() {
	p.mu.Lock()
	cmd, exited := p.cmd, p.exited
	p.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Signal(syscall.SIGCONT) // a stopped process dies too, but say so
	_ = cmd.Process.Kill()
	<-exited
}

// tail returns the last n lines of the process's log.
func (p *proc) tail(n int) string {
	b, _ := os.ReadFile(p.log)
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// natsProc is a nats-server child with JetStream on file storage
// (sync_interval always), alone or as one node of a cluster.
type natsProc struct {
	proc
	port, clusterPort int
	dir               string
}

// startNATSProcs starts n nats-servers (n > 1: a cluster named "faults")
// and waits until JetStream answers on each. A node that exits at once
// (a port another parallel test took between freeLoopbackPort and the
// server's bind) has the whole cluster started again on other ports.
func startNATSProcs(t *testing.T, n int) []*natsProc {
	t.Helper()
	for try := 1; ; try++ {
		nodes, err := tryNATSProcs(t, n)
		if err == nil {
			return nodes
		}
		if try == 3 || !errors.Is(err, errExitedEarly) {
			t.Fatal(err)
		}
		t.Logf("nats-server start, try %d: %v; starting again on other ports", try, err)
	}
}

func tryNATSProcs(t *testing.T, n int) ([]*natsProc, error) {
	t.Helper()
	_, bin := binaries(t)
	nodes := make([]*natsProc, n)
	for i := range nodes {
		dir := t.TempDir()
		nodes[i] = &natsProc{port: freeLoopbackPort(t), clusterPort: freeLoopbackPort(t), dir: dir}
		nodes[i].proc = proc{name: fmt.Sprintf("nats-%d", i+1), log: filepath.Join(dir, "nats.log")}
	}
	for i, nd := range nodes {
		conf := fmt.Sprintf("server_name: n%d\nlisten: 127.0.0.1:%d\njetstream {\n  store_dir: %q\n  sync_interval: always\n}\n",
			i+1, nd.port, filepath.Join(nd.dir, "js"))
		if n > 1 {
			var routes []string
			for _, o := range nodes {
				routes = append(routes, fmt.Sprintf("nats://127.0.0.1:%d", o.clusterPort))
			}
			conf += fmt.Sprintf("cluster {\n  name: faults\n  listen: 127.0.0.1:%d\n  routes: [%s]\n}\n", nd.clusterPort, strings.Join(routes, ", "))
		}
		path := filepath.Join(nd.dir, "nats.conf")
		if err := os.WriteFile(path, []byte(conf), 0o644); err != nil {
			t.Fatal(err)
		}
		nd.args = []string{bin, "-c", path}
		if err := nd.start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(nd.kill)
	}
	for _, nd := range nodes {
		if err := nd.listening(30 * time.Second); err != nil {
			for _, o := range nodes {
				o.kill()
			}
			return nil, err
		}
	}
	return nodes, nil
}

// errExitedEarly: a server exited before it accepted connections.
var errExitedEarly = errors.New("exited before listening")

// listening waits until the server accepts client connections; an error
// says why not, with the end of its log.
func (n *natsProc) listening(timeout time.Duration) error {
	n.mu.Lock()
	exited := n.exited
	n.mu.Unlock()
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		c, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", n.port), 200*time.Millisecond)
		if err == nil {
			_ = c.Close()
			return nil
		}
		select {
		case <-exited:
			return fmt.Errorf("%s (port %d) %w:\n%s", n.name, n.port, errExitedEarly, n.tail(10))
		case <-time.After(50 * time.Millisecond):
		}
	}
	return fmt.Errorf("%s not listening on %d after %s:\n%s", n.name, n.port, timeout, n.tail(10))
}

func (n *natsProc) url() string { return fmt.Sprintf("nats://127.0.0.1:%d", n.port) }

// waitListening waits until the server accepts client connections.
func (n *natsProc) waitListening(t *testing.T) {
	t.Helper()
	if err := n.listening(30 * time.Second); err != nil {
		t.Fatal(err)
	}
}

// restart starts the killed server again on its port and store.
func (n *natsProc) restart(t *testing.T) {
	t.Helper()
	if err := n.start(); err != nil {
		t.Fatal(err)
	}
	n.waitListening(t)
}

// replicaProc is a `personaq serve` child. Its command personas' agents
// run in process groups of their own, children of the replica.
type replicaProc struct {
	proc
	readyURL string
}

// startReplicaProc starts `personaq serve` with config; waitReady waits
// until it serves.
func startReplicaProc(t *testing.T, name, dir, config string) *replicaProc {
	t.Helper()
	bin, _ := binaries(t)
	path := filepath.Join(dir, name+".yaml")
	if err := os.WriteFile(path, []byte(config), 0o644); err != nil {
		t.Fatal(err)
	}
	port := freeLoopbackPort(t)
	r := &replicaProc{readyURL: fmt.Sprintf("http://127.0.0.1:%d/readyz", port)}
	r.proc = proc{name: name, log: filepath.Join(dir, name+".log"),
		args: []string{bin, "serve", "--config", path, "--log-format", "json", "--metrics-addr", fmt.Sprintf("127.0.0.1:%d", port)}}
	if err := r.start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		r.kill()
		if t.Failed() {
			t.Logf("---- %s (last 30 lines of %s) ----\n%s", name, r.log, r.tail(30))
		}
	})
	return r
}

// waitReady waits until the replica's /readyz says 200.
func (r *replicaProc) waitReady(t *testing.T) {
	t.Helper()
	waitUntil(t, r.name+" ready", 30*time.Second, func() bool {
		resp, err := http.Get(r.readyURL)
		if err != nil {
			return false
		}
		_ = resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
}

// agents returns the pids of the replica's running agents: the children
// of its children, the agents' supervisors (each supervisor leads its
// agent's process group; see supervisors and pgidOf).
func (r *replicaProc) agents() []int {
	var out []int
	for _, s := range r.supervisors() {
		out = append(out, childrenOf(s)...)
	}
	return out
}

// supervisors returns the pids of the replica's live children: one
// supervisor per running agent, each the leader of its agent's group.
func (r *replicaProc) supervisors() []int { return childrenOf(r.pid()) }

// childrenOf lists the live (not zombie) children of parent.
func childrenOf(parent int) []int {
	entries, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if ppid, state, ok := procStat(pid); ok && ppid == parent && state != "Z" {
			out = append(out, pid)
		}
	}
	return out
}

// groupMembers lists the live (not zombie) processes of process group pgid.
func groupMembers(pgid int) []int {
	entries, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || !running(pid) {
			continue
		}
		if g, err := syscall.Getpgid(pid); err == nil && g == pgid {
			out = append(out, pid)
		}
	}
	return out
}

// procStat reads a process's parent pid and state from /proc.
func procStat(pid int) (ppid int, state string, ok bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, "", false
	}
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return 0, "", false
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 2 {
		return 0, "", false
	}
	ppid, err = strconv.Atoi(f[1])
	return ppid, f[0], err == nil
}

// running reports whether pid is a live (not zombie) process.
func running(pid int) bool {
	_, state, ok := procStat(pid)
	return ok && state != "Z"
}

// waitUntil polls cond every 10ms until it holds, failing after timeout.
func waitUntil(t *testing.T, what string, timeout time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		<-tick.C
	}
}

// personaScript is the command persona of the fault suite. Every run logs
// a start line and an end line (also when stopped by SIGTERM) to $RUNLOG:
//
//	start <request id> <attempt> <unix ns> <pid>
//	end   <request id> <attempt> <unix ns> <pid> <exit code | killed>
//
// It works $WORK_S seconds, then exits by its first argument: ok (0),
// failonce (75, retryable, on attempt 1; then 0), termonce (1, terminal, on
// attempt 1; then 0), failall (75 on every attempt).
const personaScript = `#!/bin/sh
now() { date +%s%N; }
trap 'echo "end $PERSONAQ_REQUEST_ID $PERSONAQ_ATTEMPT $(now) $$ killed" >> "$RUNLOG"; exit 143' TERM
echo "start $PERSONAQ_REQUEST_ID $PERSONAQ_ATTEMPT $(now) $$" >> "$RUNLOG"
cat > /dev/null
sleep "$WORK_S" & wait $!
code=0
case "$1" in
  failonce) [ "$PERSONAQ_ATTEMPT" = 1 ] && code=75 ;;
  termonce) [ "$PERSONAQ_ATTEMPT" = 1 ] && code=1 ;;
  failall) code=75 ;;
esac
echo "end $PERSONAQ_REQUEST_ID $PERSONAQ_ATTEMPT $(now) $$ $code" >> "$RUNLOG"
exit $code
`

// personaRun is one run of the persona, from the run log.
type personaRun struct {
	request    string
	attempt    int
	pid        int
	start, end time.Time // end zero: no end line
	status     string    // exit code, "killed", or "" without an end line
}

// readRuns parses the run log into runs by request id.
func readRuns(path string) (map[string][]*personaRun, error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return map[string][]*personaRun{}, nil
	}
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }()
	out := map[string][]*personaRun{}
	open := map[int]*personaRun{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 5 {
			continue // a line cut short by a kill
		}
		attempt, _ := strconv.Atoi(f[2])
		ns, err1 := strconv.ParseInt(f[3], 10, 64)
		pid, err2 := strconv.Atoi(f[4])
		if err1 != nil || err2 != nil {
			continue
		}
		at := time.Unix(0, ns)
		switch f[0] {
		case "start":
			r := &personaRun{request: f[1], attempt: attempt, pid: pid, start: at}
			out[f[1]] = append(out[f[1]], r)
			open[pid] = r
		case "end":
			if r := open[pid]; r != nil {
				r.end = at
				if len(f) > 5 {
					r.status = f[5]
				}
				delete(open, pid)
			}
		}
	}
	return out, sc.Err()
}

// waitCtx is a context for one test's background calls.
func waitCtx(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}
