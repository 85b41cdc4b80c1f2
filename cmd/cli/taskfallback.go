package cli

import (
	"context"
	"errors"
	"fmt"

	"github.com/personaq/personaq/consumers/wire"
)

// errNoLedgerEntries: the ledger `task show` reads has nothing for the task
// (expired after its TTL, never run, or run by replicas writing another
// ledger).
var errNoLedgerEntries = errors.New("no ledger entries")

// stateOtherLedger is the state of a step the ledger knows nothing of but
// whose terminal record is in NATS.
const stateOtherLedger = "ran; attempts recorded in another ledger (or expired from this one)"

// recordsOnly builds the task's steps from its terminal records in NATS,
// for a task the ledger (named which) knows nothing of: the requests ran,
// their attempts are elsewhere. cause is returned, naming the ledger, when
// NATS has no record of the task either.
func recordsOnly(ctx context.Context, g *globals, task, only, which string, cause error) ([]stepView, error) {
	nc, js, err := g.connect(ctx)
	if err != nil {
		return nil, fmt.Errorf("%w in %s, and its terminal records could not be read: %w", cause, which, err)
	}
	defer nc.Close()
	found, err := wire.NewOutcomes(js, wire.Topology{}).ForTask(ctx, task)
	if err != nil {
		return nil, fmt.Errorf("%w in %s, and its terminal records could not be read: %w", cause, which, err)
	}
	var out []stepView
	for _, rec := range found.Records {
		if only == "" || rec.Step == only {
			out = append(out, stepView{Step: rec.Step, RequestID: rec.RequestID, State: stateOtherLedger})
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%w in %s, and no terminal record in NATS (%d read): never run, or expired", cause, which, found.Scanned)
	}
	return out, nil
}
