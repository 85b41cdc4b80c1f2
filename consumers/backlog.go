package consumers

import (
	"context"
	"fmt"
	"slices"
)

// Backlog is one persona's durable consumer as the server counts it: what
// the replicas serving the persona have still to do.
type Backlog struct {
	Persona string
	// Pending is how many messages wait to be delivered (NumPending).
	Pending uint64
	// AckPending is how many are delivered and not yet settled: running,
	// held for a short retry, or lost with a worker until AckWait passes.
	AckPending int
	// Redelivered is how many of those were delivered more than once.
	Redelivered int
}

// Backlogs reads the backlog of every persona this replica serves from
// the server (one consumer info request each), sorted by persona.
func (r *Runtime) Backlogs(ctx context.Context) ([]Backlog, error) {
	names := make([]string, 0, len(r.personas))
	for name := range r.personas {
		names = append(names, name)
	}
	slices.Sort(names)
	out := make([]Backlog, 0, len(names))
	for _, name := range names {
		c, err := r.js.Consumer(ctx, r.topo.RequestsStream, Durable(name))
		if err != nil {
			return out, fmt.Errorf("backlog of %s: %w", name, err)
		}
		info := c.CachedInfo() // fresh: Consumer just read it
		out = append(out, Backlog{Persona: name, Pending: info.NumPending, AckPending: info.NumAckPending, Redelivered: info.NumRedelivered})
	}
	return out, nil
}

// LedgerUp reports whether the attempt ledger answered the last call made
// to it (true when the replica runs without one). While it is down, no
// attempt starts: deliveries are released uncounted.
func (r *Runtime) LedgerUp() bool { return r.ledger == nil || !r.health.ledgerDown.Load() }
