package handlers

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestHTTPInvokerSendsTheLeaseDeadline: an HTTP persona gets the attempt's
// lease deadline, as read when the attempt is sent (the replica renews
// the lease, so it moves), in X-Personaq-Lease-Deadline beside the
// idempotency key; without a lease (no ledger) the header is absent.
func TestHTTPInvokerSendsTheLeaseDeadline(t *testing.T) {
	t.Parallel()
	got := make(chan http.Header, 2)
	inv := newHTTPInvoker(t, func(_ http.ResponseWriter, r *http.Request) { got <- r.Header.Clone() }, HTTPConfig{})

	lease := time.Date(2026, 11, 27, 6, 0, 0, 123456789, time.FixedZone("CET", 3600))
	req := testRequest()
	req.LeaseDeadline = func() time.Time { return lease }
	_, err := inv.Handle(t.Context(), req)
	require.NoError(t, err)
	h := <-got
	require.Equal(t, "2026-11-27T05:00:00.123456789Z", h.Get("X-Personaq-Lease-Deadline"), "RFC 3339 in UTC, to the nanosecond")
	sent, err := time.Parse(time.RFC3339Nano, h.Get("X-Personaq-Lease-Deadline"))
	require.NoError(t, err)
	require.True(t, sent.Equal(lease))
	require.Equal(t, "task-7/plan/2", h.Get("Idempotency-Key"))

	req = testRequest()
	req.LeaseDeadline = nil
	_, err = inv.Handle(t.Context(), req)
	require.NoError(t, err)
	require.NotContains(t, <-got, "X-Personaq-Lease-Deadline", "no lease, no header")
}
