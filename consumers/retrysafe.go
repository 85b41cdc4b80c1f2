package consumers

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/personaq/personaq/consumers/transport"
)

// Where a retry this replica serves itself may skip its successor's
// lookups (ownRetries): with a ledger, anywhere; without one, only where a
// delivery count cannot repeat without this replica seeing it.

// retriesSafe reports whether d, given back now for a retry, is remembered
// for its successor: with a ledger always; without one, when d came on the
// connection this replica has now, to the standalone nats-server that
// stores the requests stream.
func (r *Runtime) retriesSafe(d *transport.Delivery) bool {
	if r.ledger != nil {
		return true
	}
	return d.Connection != 0 && r.site.here(r.js, r.topo, d.Connection, time.Now())
}

// storeSite is what this replica knows of where the requests stream is
// stored, read once per connection (again after each reconnect: the
// server may be another one, or the same one restarted under a new name).
type storeSite struct {
	mu         sync.Mutex
	known      bool
	connection uint64    // the connection it was read on (transport.Delivery.Connection)
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
// standalone server js's connection is to now (requestsServer), and that
// connection is conn (transport.Delivery.Connection; 0: any).
func (s *storeSite) here(js jetstream.JetStream, t Topology, conn uint64, now time.Time) bool {
	if js == nil || js.Conn() == nil {
		return false
	}
	nc := js.Conn()
	n := nc.Stats().Reconnects + 1
	if conn != 0 && conn != n {
		return false // the delivery came on an earlier connection
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.known || s.connection != n {
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
		s.known, s.connection, s.server = true, n, server
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
