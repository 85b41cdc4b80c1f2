package cli

import (
	"fmt"
	"net"
	"strconv"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats-server/v2/server/sysmem"
)

// startEmbeddedNATS runs an in-process nats-server with JetStream storing
// under dir. listen is host:port ("" → a free loopback port).
func startEmbeddedNATS(dir, listen string) (*server.Server, error) {
	host, port := "127.0.0.1", server.RANDOM_PORT
	if listen != "" {
		h, p, err := net.SplitHostPort(listen)
		if err != nil {
			return nil, fmt.Errorf("invalid flag --listen: %w", err)
		}
		if port, err = strconv.Atoi(p); err != nil {
			return nil, fmt.Errorf("invalid flag --listen: port %q", p)
		}
		host = h
	}
	s, err := server.NewServer(&server.Options{
		ServerName: "personaq-dev", Host: host, Port: port, JetStream: true, StoreDir: dir,
		NoLog: true, NoSigs: true,
		// A dev server must not lose acknowledged writes (sync_interval: always).
		SyncAlways:         true,
		JetStreamMaxMemory: embeddedMaxMemory(sysmem.Memory()),
	})
	if err != nil {
		return nil, fmt.Errorf("embedded nats-server: %w", err)
	}
	s.Start()
	if !s.ReadyForConnections(10 * time.Second) {
		s.Shutdown()
		return nil, fmt.Errorf("embedded nats-server did not start within 10s")
	}
	return s, nil
}

// startEmbeddedRedis runs an in-process Redis-protocol server (miniredis) so
// the quick start needs no set-up; `serve` always wants a real Redis.
func startEmbeddedRedis() (*miniredis.Miniredis, error) {
	m := miniredis.NewMiniRedis()
	if err := m.StartAddr("127.0.0.1:0"); err != nil {
		return nil, fmt.Errorf("embedded redis: %w", err)
	}
	return m, nil
}

// embeddedMaxMemory is the JetStream memory limit of the embedded server:
// three quarters of the machine's memory (mem bytes), what a nats-server
// of its own takes by default, or 0 (the server's default) when mem is
// unknown. Left to itself, a server in personaq's process would take three
// quarters of GOMEMLIMIT instead, which is meant for personaq's heap: with
// GOMEMLIMIT=200MiB that is 150 MiB, less than the live output and the
// attempt events streams reserve (256 MiB each), and personaq could not
// start.
func embeddedMaxMemory(mem int64) int64 {
	if mem <= 0 {
		return 0
	}
	return mem / 4 * 3
}
