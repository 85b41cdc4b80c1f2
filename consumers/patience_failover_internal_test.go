package consumers

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/personaq/personaq/consumers/transport"
	"github.com/personaq/personaq/schemas"
)

// noLeader is what a cluster answers while a stream elects its leader.
var noLeader = &jetstream.APIError{Code: 503, ErrorCode: 10008, Description: "JetStream system temporarily unavailable"}

// failoverJS answers the first publishes and record reads with noLeader,
// as a stream between leaders does, then passes them to the server; it
// counts the record reads asked of it.
type failoverJS struct {
	jetstream.JetStream
	publishFails, readFails atomic.Int32
	reads                   atomic.Int32
}

func (f *failoverJS) PublishMsg(ctx context.Context, m *nats.Msg, opts ...jetstream.PublishOpt) (*jetstream.PubAck, error) {
	if f.publishFails.Add(-1) >= 0 {
		return nil, noLeader
	}
	return f.JetStream.PublishMsg(ctx, m, opts...)
}

func (f *failoverJS) Stream(ctx context.Context, name string) (jetstream.Stream, error) {
	s, err := f.JetStream.Stream(ctx, name)
	if err != nil {
		return nil, err
	}
	return &failoverStream{Stream: s, f: f}, nil
}

type failoverStream struct {
	jetstream.Stream
	f *failoverJS
}

func (s *failoverStream) GetLastMsgForSubject(ctx context.Context, subject string) (*jetstream.RawStreamMsg, error) {
	s.f.reads.Add(1)
	if s.f.readFails.Add(-1) >= 0 {
		return nil, noLeader
	}
	return s.Stream.GetLastMsgForSubject(ctx, subject)
}

// failoverRuntime is a stage runtime whose terminal records go through
// failoverJS on an in-process server, and a decoded request's state.
func failoverRuntime(t *testing.T) (*Runtime, *attemptState, *failoverJS, *Outcomes) {
	t.Helper()
	js, topo, direct := outcomesEnv(t)
	f := &failoverJS{JetStream: js}
	r := stageRuntime(t, nil, nil)
	r.topo, r.outcomes = topo, NewOutcomes(f, topo)
	st := stageState(r, 2)
	_, done := r.decode(requestMsg(t, nil, nil), st)
	require.False(t, done)
	st.attempt.Number = 1
	return r, st, f, direct
}

// A success's terminal record written while the cluster fails over waits
// for the new leader: completed work is recorded, not given back to run
// again (a compose R3 cluster whose stream leader was SIGKILLed reran
// requests this way when the write gave up).
func TestTerminalRecordWaitsOutAFailover(t *testing.T) {
	t.Parallel()
	r, st, f, direct := failoverRuntime(t)
	f.publishFails.Store(3)
	end := ending{verdict: verdictAck, output: []byte(`"done"`)}
	require.NoError(t, r.conclude(st, &end, schemas.OutcomeSucceeded, 0))
	require.Less(t, f.publishFails.Load(), int32(0), "every refused write was tried again")
	rec, err := direct.Lookup(context.Background(), st.req.RequestID)
	require.NoError(t, err)
	require.Equal(t, schemas.OutcomeSucceeded, rec.Outcome)
	require.Equal(t, rec.RequestID, end.final.RequestID)
}

// A redelivery whose terminal record cannot be read while the cluster
// fails over is released, not run; one that can be read once the leader
// is back is settled by it.
func TestRedeliveryWaitsForItsRecordAcrossAFailover(t *testing.T) {
	t.Parallel()
	t.Run("ReadOnceTheLeaderIsBack", func(t *testing.T) {
		t.Parallel()
		r, st, f, direct := failoverRuntime(t)
		stored := &schemas.OutcomeEvent{SchemaVersion: schemas.Version, Outcome: schemas.OutcomeSucceeded,
			Persona: "p", RequestID: st.req.RequestID, TaskID: st.req.TaskID, Step: st.req.Step, Attempts: 1, At: time.Now().UTC()}
		_, _, err := direct.create(context.Background(), stored)
		require.NoError(t, err)
		f.readFails.Store(2)
		end, done := r.settledByRecord(context.Background(), st)
		require.True(t, done)
		require.Equal(t, verdictSettled, end.verdict)
		require.Equal(t, schemas.OutcomeSucceeded, end.final.Outcome)
	})
	t.Run("ReleasedWhileUnreadable", func(t *testing.T) {
		t.Parallel()
		r, st, f, _ := failoverRuntime(t)
		f.readFails.Store(1 << 20)
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		end, done := r.settledByRecord(ctx, st)
		require.True(t, done, "a delivery whose record may exist is not run")
		require.Equal(t, verdictRelease, end.verdict)
		require.Equal(t, faultDelay, end.delay)
		require.False(t, end.decision.Counted)
	})
	t.Run("RunWhenThereIsNone", func(t *testing.T) {
		t.Parallel()
		r, st, _, _ := failoverRuntime(t)
		_, done := r.settledByRecord(context.Background(), st)
		require.False(t, done)
	})
}

// The patience ends with the delivery's claim (or a shutdown past its
// drain time): the write gives up at once, and the redelivery finds
// whatever was stored.
func TestTerminalRecordPatienceEndsWithTheClaim(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		lose func(d *transport.Delivery, sub *transport.Subscriber)
	}{
		{"Fenced", func(d *transport.Delivery, _ *transport.Subscriber) { d.Fence() }},
		// A Close whose drain time runs out while the delivery is unsettled.
		{"HardStop", func(_ *transport.Delivery, sub *transport.Subscriber) { _ = sub.Close() }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r, st, f, _ := failoverRuntime(t)
			f.publishFails.Store(1 << 20)
			var sub *transport.Subscriber
			st.delivery, sub = subscribedDelivery(t, f.JetStream, r.topo)
			// The attempt's work ended with a cause of its own (a
			// cancellation): that does not end the record's patience.
			st.delivery.WorkCancel()(ErrCancelled)
			time.AfterFunc(300*time.Millisecond, func() { tc.lose(st.delivery, sub) })
			began := time.Now()
			end := ending{verdict: verdictAck, output: []byte(`"done"`)}
			require.Error(t, r.conclude(st, &end, schemas.OutcomeSucceeded, 0))
			took := time.Since(began)
			require.Greater(t, took, 250*time.Millisecond, "the work's own cancel did not end the patience")
			require.Less(t, took, 5*time.Second, "not the whole recordPatience")
		})
	}
}

// subscribedDelivery is a delivery of a real Subscriber (its claim, its
// subscription's run): one request published to persona "p" and received.
// The subscriber's drain is short, so a Close ends in a hard stop.
func subscribedDelivery(t *testing.T, js jetstream.JetStream, topo Topology) (*transport.Delivery, *transport.Subscriber) {
	t.Helper()
	ctx := context.Background()
	require.NoError(t, Provision(ctx, js, topo, []ConsumerSpec{{Persona: "p", AckWait: 10 * time.Second, MaxAckPending: 4}}))
	sub, err := transport.NewSubscriber(transport.Config{
		JetStream: js, Stream: topo.RequestsStream, Slots: 1, FetchMaxWait: 200 * time.Millisecond,
		DrainTimeout: 100 * time.Millisecond, TypedSettleOnly: true,
	})
	require.NoError(t, err)
	t.Cleanup(func() { _ = sub.Close() })
	_, err = js.Publish(ctx, topo.RequestSubject("p"), []byte(`{}`))
	require.NoError(t, err)
	ch, err := sub.Subscribe(ctx, "p")
	require.NoError(t, err)
	select {
	case m := <-ch:
		d, ok := transport.DeliveryFrom(m.Context())
		require.True(t, ok)
		return d, sub
	case <-time.After(10 * time.Second):
		t.Fatal("no delivery")
		return nil, nil
	}
}
