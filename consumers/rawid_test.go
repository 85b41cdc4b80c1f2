package consumers_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/personaq/personaq/handlers"
	"github.com/personaq/personaq/schemas"
)

// A request too large to decode (and one whose JSON breaks after its id)
// is quarantined unrun with its terminal record under the request id its
// caller waits on, read from the raw bytes; bytes without a readable id
// keep the stream.sequence key.
func TestUndecodableRequestKeepsItsRequestID(t *testing.T) {
	t.Parallel()
	h := newHarness(t, false)
	out := h.watchOutcomes()
	h.start(persona("big", handlers.Func(func(context.Context, *handlers.Request) (handlers.Result, error) {
		t.Error("the handler must not run")
		return handlers.Result{}, nil
	}), fastPolicy(1)))
	big := `{"schema_version":1,"request_id":"big-1","task_id":"t-big","step":"main","persona":"big",` +
		`"created_at":"2026-11-26T10:00:00Z","input":{"blob":"` + strings.Repeat("x", schemas.MaxPayloadBytes) + `"}}`
	broken := `{"schema_version":1,"request_id":"broken-1","task_id":"t-big","input":{` // cut off
	for _, payload := range []string{big, broken, `not json at all`} {
		_, err := h.js.Publish(context.Background(), h.topo.RequestSubject("big"), []byte(payload))
		require.NoError(t, err)
	}
	for _, id := range []string{"big-1", "broken-1"} {
		ev := out.wait(t, id, 10*time.Second)
		require.Equal(t, schemas.ReasonInvalidMessage, ev.Reason, id)
		require.Equal(t, id, h.quarantined(ev.QuarantineSeq).RequestID)
	}
	require.Eventually(t, func() bool { return out.count() == 3 }, 10*time.Second, 10*time.Millisecond)
	out.mu.Lock()
	defer out.mu.Unlock()
	require.Contains(t, out.byID, h.topo.RequestsStream+".3", "no id to read: keyed by where it was stored")
}
