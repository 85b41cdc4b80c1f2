package testenv

import (
	"net"
	"os/exec"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats-server/v2/server/sysmem"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// NATS is a nats-server with JetStream on a free loopback port: in process
// (StartNATS) or a process of its own (StartNATSProcess).
type NATS struct {
	Server *server.Server
	opts   *server.Options
	// url and proc are set instead for a server run as its own process
	// (StartNATSProcess).
	url  string
	proc *exec.Cmd
}

// StartNATS starts a JetStream-enabled nats-server storing under tb.TempDir()
// and shuts it down when the test ends.
func StartNATS(tb testing.TB) *NATS {
	tb.Helper()
	opts := &server.Options{
		Host:      "127.0.0.1",
		Port:      server.RANDOM_PORT,
		JetStream: true,
		StoreDir:  tb.TempDir(),
		NoLog:     true,
		NoSigs:    true,
		// Tests must not lose acknowledged writes on a restart.
		SyncAlways: true,
		// From the machine's memory, as personaq dev's embedded server
		// (and a server of its own) does: not from a GOMEMLIMIT set for
		// the test process's heap.
		JetStreamMaxMemory: sysmem.Memory() / 4 * 3,
	}
	n := &NATS{opts: opts}
	n.start(tb)
	tb.Cleanup(n.Stop)
	return n
}

func (n *NATS) start(tb testing.TB) {
	tb.Helper()
	s, err := server.NewServer(n.opts)
	if err != nil {
		tb.Fatalf("testenv: nats-server: %v", err)
	}
	s.Start()
	if !s.ReadyForConnections(10 * time.Second) {
		tb.Fatalf("testenv: nats-server not ready after 10s")
	}
	n.Server = s
	// Keep the port across restarts so clients reconnect.
	n.opts.Port = s.Addr().(*net.TCPAddr).Port
}

// URL is the client URL of the server.
func (n *NATS) URL() string {
	if n.Server == nil {
		return n.url
	}
	return n.Server.ClientURL()
}

// Stop shuts the server down and waits for it.
func (n *NATS) Stop() {
	n.stopProcess()
	if n.Server != nil {
		n.Server.Shutdown()
		n.Server.WaitForShutdown()
	}
}

// Restart stops the server and starts it again on the same port and store.
func (n *NATS) Restart(tb testing.TB) {
	tb.Helper()
	n.Stop()
	n.start(tb)
}

// Conn connects to the server; the connection closes when the test ends.
func (n *NATS) Conn(tb testing.TB) *nats.Conn {
	tb.Helper()
	nc, err := nats.Connect(n.URL(), nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))
	if err != nil {
		tb.Fatalf("testenv: connect %s: %v", n.URL(), err)
	}
	tb.Cleanup(nc.Close)
	return nc
}

// JetStream returns a JetStream context on a fresh connection.
func (n *NATS) JetStream(tb testing.TB) jetstream.JetStream {
	tb.Helper()
	js, err := jetstream.New(n.Conn(tb))
	if err != nil {
		tb.Fatalf("testenv: jetstream: %v", err)
	}
	return js
}
