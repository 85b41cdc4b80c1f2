package consumers

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// Where a retry this replica serves itself may skip its successor's
// lookups (ownRetries): with a ledger, anywhere; without one, only where a
// delivery count cannot repeat without this replica seeing it.

// retriesSafe reports whether a retry given back now is remembered for its
// successor: with a ledger always; without one, when the requests stream
// is stored by the standalone nats-server this connection is to now.
func (r *Runtime) retriesSafe() bool {
	return r.ledger != nil || r.site.here(r.js, r.topo, time.Now())
}

// reconnects is how many times the runtime's connection reconnected: a
// retry remembered before a reconnect is not taken after it.
func (r *Runtime) reconnects() uint64 {
	if r.js == nil || r.js.Conn() == nil { // a runtime built for a test of its stages
		return 0
	}
	return r.js.Conn().Stats().Reconnects
}

// storeSite is what this replica knows of where the requests stream is
// stored, read once per connection (again after each reconnect: the
// server may be another one, or the same one restarted under a new name).
type storeSite struct {
	mu         sync.Mutex
	known      bool
	reconnects uint64    // the connection's reconnect count when read
	server     string    // requestsServer's answer then
	retryAt    time.Time // after a failed read, when to read again
}

const (
	// siteTimeout bounds the read of the requests stream's info.
	siteTimeout = 2 * time.Second
	// siteRetry is how long a failed read leaves retries unremembered.
	siteRetry = 5 * time.Second
)

// here reports whether the requests stream of t is stored by the
// standalone server js's connection is to now (requestsServer).
func (s *storeSite) here(js jetstream.JetStream, t Topology, now time.Time) bool {
	if js == nil || js.Conn() == nil {
		return false
	}
	nc := js.Conn()
	n := nc.Stats().Reconnects
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.known || s.reconnects != n {
		if now.Before(s.retryAt) {
			return false
		}
		ctx, cancel := context.WithTimeout(context.Background(), siteTimeout)
		server, err := requestsServer(ctx, js, t)
		cancel()
		if err != nil {
			s.known, s.retryAt = false, now.Add(siteRetry)
			return false
		}
		s.known, s.reconnects, s.server = true, n, server
	}
	return s.server != "" && nc.ConnectedServerName() == s.server && nc.ConnectedClusterName() == ""
}

// requestsServer names the nats-server that stores the requests stream
// when it is the one this connection is to and it is alone: not in a
// cluster, the stream a single replica, the JetStream API the server's own
// (no domain, no other prefix). There the consumers' state goes back only
// when that server restarts on its store, which ends this connection.
// Anything else is "", and so is a stream that does not exist; err is a
// stream that could not be read.
func requestsServer(ctx context.Context, js jetstream.JetStream, t Topology) (string, error) {
	o := js.Options()
	if o.Domain != "" || (o.APIPrefix != "" && o.APIPrefix != jetstream.DefaultAPIPrefix) {
		return "", nil
	}
	nc := js.Conn()
	if nc.ConnectedClusterName() != "" {
		return "", nil
	}
	s, err := js.Stream(ctx, t.RequestsStream)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	info := s.CachedInfo()
	if max(info.Config.Replicas, 1) != 1 || info.Cluster == nil || info.Cluster.Leader != nc.ConnectedServerName() {
		return "", nil
	}
	return info.Cluster.Leader, nil
}
