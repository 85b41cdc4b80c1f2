package consumers_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/personaq/personaq/consumers"
	"github.com/personaq/personaq/handlers"
	"github.com/personaq/personaq/schemas"
)

// Attempt events past Topology.AttemptsMaxBytes push the oldest out
// instead of growing the server's memory or failing: requests keep ending
// as usual, the stream stays within its cap, and the newest request's
// events are kept.
func TestAttemptEventsStayWithinTheirByteCap(t *testing.T) {
	t.Parallel()
	const capBytes = 16 << 10
	h := newHarness(t, false)
	h.topo.AttemptsStream, h.topo.AttemptsPrefix, h.topo.AttemptsMaxBytes = "CAPPED_ATTEMPTS", "capped.attempts", capBytes
	require.NoError(t, consumers.Provision(setupCtx(t), h.js, h.topo, nil))
	out := h.watchOutcomes()
	h.startMod(func(c *consumers.Config) { c.Topology = h.topo }, persona("cap", handlers.Func(func(context.Context, *handlers.Request) (handlers.Result, error) {
		return handlers.Result{}, nil
	}), fastPolicy(1)))
	var reqs []*schemas.PersonaRequest
	for range 120 { // about 400 bytes of events each: three times the cap
		reqs = append(reqs, h.publish("cap", "capped"))
	}
	for _, req := range reqs {
		require.Equal(t, schemas.OutcomeSucceeded, out.wait(t, req.RequestID, 10*time.Second).Outcome)
	}
	last := reqs[len(reqs)-1]
	s, err := h.js.Stream(context.Background(), h.topo.AttemptsStream)
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		m, err := s.GetLastMsgForSubject(context.Background(), h.topo.AttemptSubject(last.RequestID, string(schemas.AttemptStarted)))
		if err != nil {
			return false
		}
		var ev schemas.AttemptEvent
		return json.Unmarshal(m.Data, &ev) == nil && ev.RequestID == last.RequestID
	}, 5*time.Second, 20*time.Millisecond, "the newest request's started event is kept")
	info, err := s.Info(context.Background())
	require.NoError(t, err)
	require.LessOrEqual(t, info.State.Bytes, uint64(capBytes))
	require.Greater(t, info.State.FirstSeq, uint64(1), "the oldest events went")
}
