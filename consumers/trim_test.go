package consumers_test

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/personaq/personaq/consumers"
	"github.com/personaq/personaq/consumers/wire"
	"github.com/personaq/personaq/handlers"
	"github.com/personaq/personaq/integration/testenv"
	"github.com/personaq/personaq/schemas"
)

// On the limits-retention requests stream a running replica trims what it
// acked, and never a request still running: the request held by a slow
// handler stays stored while the requests after it are acked, and once
// it is acked too the stream ends empty.
func TestRuntimeTrimsAckedRequestsAndKeepsRunningOnes(t *testing.T) {
	t.Parallel()
	h := newHarness(t, true)
	out := h.watchOutcomes()
	release := make(chan struct{})
	h.start(persona("trim", handlers.Func(func(_ context.Context, req *handlers.Request) (handlers.Result, error) {
		if req.Message.TaskID == "slow" {
			<-release
		}
		return handlers.Result{}, nil
	}), fastPolicy(1)))
	slow := h.publish("trim", "slow")
	var fast []*schemas.PersonaRequest
	for range 5 {
		fast = append(fast, h.publish("trim", "fast"))
	}
	for _, req := range fast {
		require.Equal(t, schemas.OutcomeSucceeded, out.wait(t, req.RequestID, 10*time.Second).Outcome)
	}
	s, err := h.js.Stream(context.Background(), h.topo.RequestsStream)
	require.NoError(t, err)
	// Three trim intervals: the floor is read one interval before it is
	// used, and it stays below the running request.
	time.Sleep(3500 * time.Millisecond)
	_, err = s.GetMsg(context.Background(), 1)
	require.NoError(t, err, "the running request is never trimmed")
	close(release)
	require.Equal(t, schemas.OutcomeSucceeded, out.wait(t, slow.RequestID, 10*time.Second).Outcome)
	require.Eventually(t, func() bool {
		info, err := s.Info(context.Background())
		return err == nil && info.State.Msgs == 0
	}, 10*time.Second, 50*time.Millisecond, "every acked request trimmed")
}

// Provision gives the requests stream limits retention (an ack writes
// nothing), the outcomes stream atomic batches, and keeps attempt events
// in memory (off the fsync path) under a byte cap; a work-queue requests stream an earlier
// version provisioned is kept as it is, since its retention cannot change
// in place.
func TestProvisionStreamsForOneDurableWrite(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		old  bool
		want jetstream.RetentionPolicy
	}{{"New", false, jetstream.LimitsPolicy}, {"EarlierWorkQueue", true, jetstream.WorkQueuePolicy}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			js := testenv.StartNATS(t).JetStream(t)
			topo := wire.Topology{}.WithDefaults()
			if tc.old { // as an earlier version provisioned them
				_, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: topo.RequestsStream, Subjects: []string{topo.RequestsPrefix + ".>"}, Retention: jetstream.WorkQueuePolicy})
				require.NoError(t, err)
				_, err = js.CreateStream(ctx, jetstream.StreamConfig{Name: topo.OutcomesStream, Subjects: []string{topo.OutcomesPrefix + ".>"}, MaxAge: topo.OutcomesMaxAge})
				require.NoError(t, err)
				_, err = js.CreateStream(ctx, jetstream.StreamConfig{Name: topo.AttemptsStream, Subjects: []string{topo.AttemptsPrefix + ".>"}, MaxAge: topo.AttemptsMaxAge, Storage: jetstream.MemoryStorage})
				require.NoError(t, err)
			}
			require.NoError(t, consumers.Provision(ctx, js, topo, nil))
			require.NoError(t, consumers.Provision(ctx, js, topo, nil), "idempotent")
			ret, err := consumers.RequestRetention(ctx, js, topo)
			require.NoError(t, err)
			require.Equal(t, tc.want, ret)
			out, err := js.Stream(ctx, topo.OutcomesStream)
			require.NoError(t, err)
			require.True(t, out.CachedInfo().Config.AllowAtomicPublish, "turned on in place on an earlier stream")
			att, err := js.Stream(ctx, topo.AttemptsStream)
			require.NoError(t, err)
			require.Equal(t, jetstream.MemoryStorage, att.CachedInfo().Config.Storage)
			require.Equal(t, int64(wire.DefaultAttemptsMaxBytes), att.CachedInfo().Config.MaxBytes, "capped, in place on an earlier stream")
			require.Equal(t, jetstream.DiscardOld, att.CachedInfo().Config.Discard)
		})
	}
}

// On a limits-retention requests stream FindOpen skips the requests every
// consumer acked (they wait only for the trimmer) and still finds an open
// request on a subject no consumer serves.
func TestFindOpenSkipsAckedRequestsOnALimitsStream(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	js := testenv.StartNATS(t).JetStream(t)
	topo := wire.Topology{}.WithDefaults()
	require.NoError(t, consumers.Provision(ctx, js, topo, []consumers.ConsumerSpec{{Persona: "p", AckWait: 5 * time.Second, MaxAckPending: 8}}))
	publish := func(persona string) string {
		req := schemas.NewRequest("t-open", "main", persona)
		_, err := wire.PublishRequest(ctx, js, topo, req)
		require.NoError(t, err)
		return req.RequestID
	}
	for range 3 {
		publish("p")
	}
	c, err := js.Consumer(ctx, topo.RequestsStream, wire.Durable("p"))
	require.NoError(t, err)
	b, err := c.Fetch(3, jetstream.FetchMaxWait(time.Second))
	require.NoError(t, err)
	for m := range b.Messages() {
		require.NoError(t, m.DoubleAck(ctx))
	}
	open := publish("p")
	all := func(*schemas.PersonaRequest) bool { return true }
	found, err := wire.FindOpen(ctx, js, topo, all)
	require.NoError(t, err)
	require.Len(t, found, 1)
	require.Equal(t, open, found[0].Request.RequestID)

	ghost := publish("ghost") // no consumer: no ack floor covers it
	found, err = wire.FindOpen(ctx, js, topo, all)
	require.NoError(t, err)
	var ids []string
	for _, o := range found {
		ids = append(ids, o.Request.RequestID)
	}
	require.Contains(t, ids, open)
	require.Contains(t, ids, ghost)
}
