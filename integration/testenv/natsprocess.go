package testenv

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
)

// natsServerModule is the nats-server the module pins (go.mod): the same
// code the in-process server runs, built as its own program.
const natsServerModule = "github.com/nats-io/nats-server/v2"

// natsBinary builds the pinned nats-server from the module cache (nothing
// is downloaded at run time) into one file per version under the temp
// directory, which later test binaries reuse.
var natsBinary = sync.OnceValues(func() (string, error) {
	v, err := exec.Command("go", "list", "-m", "-f", "{{.Version}}", natsServerModule).Output()
	if err != nil {
		return "", fmt.Errorf("go list -m %s: %w", natsServerModule, err)
	}
	bin := filepath.Join(os.TempDir(), "personaq-nats-server-"+strings.TrimSpace(string(v)))
	if _, err := os.Stat(bin); err == nil {
		return bin, nil
	}
	tmp := fmt.Sprintf("%s.%d", bin, os.Getpid())
	if out, err := exec.Command("go", "build", "-o", tmp, natsServerModule).CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build %s: %w: %s", natsServerModule, err, out)
	}
	return bin, os.Rename(tmp, bin) // whole or absent, whichever build finishes first
})

// StartNATSProcess starts the pinned nats-server as a process of its own
// (JetStream, file storage under tb.TempDir(), sync_interval always, as
// StartNATS), so a test can measure its own process without the server's
// memory, as a replica is deployed. Restart is not supported; Stop ends
// the process, as the test's end does.
func StartNATSProcess(tb testing.TB) *NATS {
	tb.Helper()
	bin, err := natsBinary()
	if err != nil {
		tb.Fatalf("testenv: %v", err)
	}
	port, err := freePort()
	if err != nil {
		tb.Fatalf("testenv: %v", err)
	}
	dir := tb.TempDir()
	conf := filepath.Join(dir, "nats.conf")
	body := fmt.Sprintf("listen: 127.0.0.1:%d\njetstream { store_dir: %q, sync_interval: always }\n", port, filepath.Join(dir, "js"))
	if err := os.WriteFile(conf, []byte(body), 0o600); err != nil {
		tb.Fatalf("testenv: %v", err)
	}
	var out strings.Builder
	cmd := exec.Command(bin, "-c", conf)
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		tb.Fatalf("testenv: start %s: %v", bin, err)
	}
	n := &NATS{url: "nats://127.0.0.1:" + strconv.Itoa(port), proc: cmd}
	tb.Cleanup(n.Stop)
	if err := waitNATS(n.url, 10*time.Second); err != nil {
		n.Stop()
		tb.Fatalf("testenv: nats-server process: %v; output:\n%s", err, out.String())
	}
	return n
}

// waitNATS connects to url until it answers or within passes.
func waitNATS(url string, within time.Duration) error {
	deadline := time.Now().Add(within)
	for {
		nc, err := nats.Connect(url, nats.Timeout(200*time.Millisecond))
		if err == nil {
			nc.Close()
			return nil
		}
		if time.Now().After(deadline) {
			return err
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// PeakRSS is the server process's peak resident set (VmHWM, bytes); 0 for
// an in-process server or once the process ended.
func (n *NATS) PeakRSS() uint64 {
	if n.proc == nil || n.proc.Process == nil {
		return 0
	}
	return ProcStatus(strconv.Itoa(n.proc.Process.Pid), "VmHWM")
}

// stopProcess ends the server process (SIGTERM, then SIGKILL after 5 s).
func (n *NATS) stopProcess() {
	p := n.proc
	if p == nil || p.Process == nil || p.ProcessState != nil {
		return
	}
	_ = p.Process.Signal(syscall.SIGTERM)
	done := make(chan error, 1)
	go func() { done <- p.Wait() }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		_ = p.Process.Kill()
		<-done
	}
}

// CPU is the CPU time the server process has used so far; 0 for an
// in-process server.
func (n *NATS) CPU() time.Duration {
	if n.proc == nil || n.proc.Process == nil {
		return 0
	}
	return ProcCPU(n.proc.Process.Pid)
}
