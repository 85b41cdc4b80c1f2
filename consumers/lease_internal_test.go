package consumers

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/personaq/personaq/consumers/ledger"
)

// refusingLedger refuses every renewal, as Redis does once a Finish has
// released the lease.
type refusingLedger struct{ Ledger }

func (refusingLedger) Renew(_ context.Context, leases []ledger.Lease, _ time.Duration) []error {
	errs := make([]error, len(leases))
	for i := range errs {
		errs[i] = ledger.ErrLeaseLost
	}
	return errs
}

// A renewal refused because the attempt's own Finish released the lease
// (the renewal was on its way) is not a lost lease: the attempt settles.
// A renewal refused while the attempt still runs is.
func TestLeaseRefusedAfterFinishIsNotLost(t *testing.T) {
	t.Parallel()
	var frozen atomic.Bool
	var lost []string
	k := newLeaseKeeper(refusingLedger{}, &frozen, func(_ *attemptLease, why string) { lost = append(lost, why) })
	running := newAttemptLease(ledger.Lease{}, time.Minute, time.Now(), nil, 1)
	finishing := newAttemptLease(ledger.Lease{}, time.Minute, time.Now(), nil, 1)
	k.add(running)
	k.add(finishing)
	group := []*attemptLease{running, finishing}
	finishing.end() // Finish was sent after the keeper took its snapshot
	k.renew(context.Background(), time.Minute, group)
	require.True(t, running.isLost())
	require.False(t, finishing.isLost())
	require.True(t, finishing.valid(time.Now()), "its settle still goes out")
	require.Equal(t, []string{"ledger refused the renewal"}, lost)
}
