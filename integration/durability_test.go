//go:build integration

package integration

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/personaq/personaq/consumers"
	"github.com/personaq/personaq/consumers/streams"
	"github.com/personaq/personaq/schemas"
)

// batchEchoPersona is an in-process persona (the demo echo invoker): its
// attempts end fast enough for many terminal records to be committed
// together, which a command persona's process spawns never are.
const batchEchoPersona = `  echo:
    invoker: {type: demo, demo: echo}
    timeout: 10s
    policy: {preset: persona, max_attempts: 3, schedule: {type: fixed, every: 200ms}}
`

// nats-server is SIGKILLed while many requests settle at once, so terminal
// records are being committed in atomic batches (and acks sent after
// them), and started again on its store. A batch is all or nothing and an
// ack follows its record's confirmation: every request ends with exactly
// one terminal record; the command persona's requests pass every check of
// the fault suite (none without a run, none run beyond its maximum, no
// overlap); the requests stream, with limits retention, is drained by the
// trimmer.
func TestFaultNATSKill9MidBatch(t *testing.T) {
	t.Parallel()
	e := newFaultEnv(t, 1)
	cfg := e.config(64) + batchEchoPersona
	for i := range 2 {
		r := startReplicaProc(t, fmt.Sprintf("batchkill-%d", i+1), e.dir, cfg)
		t.Cleanup(r.kill)
		r.waitReady(t)
	}
	runs := e.requests("batchkill", 30, "ok")
	echoes := newRequests("batchkill", "echo", 3000, "")
	e.publish(append(echoes, runs...)...)
	waitUntil(t, "the first terminal records", 60*time.Second, func() bool {
		return e.obs.poll(e.ctx) == nil && e.settledCount(echoes) >= 200
	})
	settled := e.settledCount(echoes)
	e.nats[0].kill()
	down := time.Now()
	e.nats[0].restart(t)
	res := e.check(runs, 2*time.Minute)
	waitUntil(t, "every echo request's terminal record", time.Minute, func() bool {
		return e.obs.poll(e.ctx) == nil && e.settledCount(echoes) == len(echoes)
	})
	e.obs.mu.Lock()
	for _, r := range echoes {
		evs := e.obs.outcomes[r.RequestID]
		require.Len(t, evs, 1, "%s: one terminal record", r.RequestID)
		require.Equal(t, schemas.OutcomeSucceeded, evs[0].Outcome)
		require.LessOrEqual(t, evs[0].Attempts, 3)
	}
	e.obs.mu.Unlock()
	ret, err := consumers.RequestRetention(context.Background(), e.js, topo)
	require.NoError(t, err)
	require.Equal(t, jetstream.LimitsPolicy, ret, "the replicas provisioned the requests stream")
	batched := batchedRecords(t, e.js)
	require.Positive(t, batched, "records were committed in batches")
	e.note("nats-server SIGKILLed with %d of %d echo requests settled, listening again %s later on its store; %d of %d records committed in atomic batches, each echo request one record",
		settled, len(echoes), time.Since(down).Round(100*time.Millisecond), batched, len(echoes)+len(runs))
	e.record(res)
}

// batchedRecords counts the terminal records stored by an atomic batch
// (they keep its Nats-Batch-Id header).
func batchedRecords(t *testing.T, js jetstream.JetStream) int {
	t.Helper()
	ctx := context.Background()
	s, err := js.Stream(ctx, topo.OutcomesStream)
	require.NoError(t, err)
	n := 0
	for seq := s.CachedInfo().State.FirstSeq; seq <= s.CachedInfo().State.LastSeq; seq++ {
		if raw, err := s.GetMsg(ctx, seq); err == nil && raw.Header.Get(streams.HeaderBatchID) != "" {
			n++
		}
	}
	return n
}
