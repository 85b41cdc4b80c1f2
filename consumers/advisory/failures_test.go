package advisory_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/personaq/personaq/consumers"
	"github.com/personaq/personaq/consumers/advisory"
	"github.com/personaq/personaq/dlq"
	"github.com/personaq/personaq/schemas"
)

// failingFor returns a writer whose records for persona go to a subject no
// stream stores: every capture of such a message fails.
func (b *bundle) failingFor(persona string) *dlq.Writer {
	real := b.topo.QuarantineSubject
	return dlq.NewWriter(b.js, func(reason, p string) string {
		if p == persona {
			return "nowhere." + reason
		}
		return real(reason, p)
	}, dlq.WithWriterLogger(&b.log))
}

func (b *bundle) listenerWith(w *dlq.Writer, retry time.Duration) *advisory.Listener {
	b.t.Helper()
	l, err := advisory.NewListener(advisory.Config{
		JetStream: b.js, Writer: w, Logger: &b.log, SweepGrace: time.Millisecond,
		CaptureRetry: retry, SweepInterval: -1,
	})
	require.NoError(b.t, err)
	return l
}

// giveUp delivers every message of persona's consumer once (MaxDeliver 1)
// without acking, and waits until the server has given up on them.
func (b *bundle) giveUp(persona string, n int) {
	b.t.Helper()
	require.NoError(b.t, consumers.Provision(ctx(b.t), b.js, b.topo, []consumers.ConsumerSpec{
		{Persona: persona, AckWait: 100 * time.Millisecond, MaxAckPending: 10, MaxDeliver: 1},
	}))
	cons, err := b.js.Consumer(ctx(b.t), b.topo.RequestsStream, consumers.Durable(persona))
	require.NoError(b.t, err)
	got := 0
	for got < n {
		batch, err := cons.Fetch(n-got, jetstream.FetchMaxWait(5*time.Second))
		require.NoError(b.t, err)
		for range batch.Messages() {
			got++
		}
	}
	require.Eventually(b.t, func() bool {
		// A pull after AckWait makes the server give up on them.
		batch, err := cons.Fetch(1, jetstream.FetchMaxWait(50*time.Millisecond))
		require.NoError(b.t, err)
		for range batch.Messages() {
			b.t.Fatal("a message past MaxDeliver was delivered")
		}
		info, err := cons.Info(ctx(b.t))
		return err == nil && info.NumAckPending == 0
	}, 10*time.Second, 20*time.Millisecond)
}

// The issue: one message whose capture fails stopped the sweep, so no
// other stuck message was ever captured. Now the sweep goes on, reports
// the failure (error, SweepResult.Failed, quarantine stats) and a later
// sweep captures the message once the cause is gone.
func TestSweepCarriesOnPastAFailingCapture(t *testing.T) {
	t.Parallel()
	b := newBundle(t)
	// Both are on the stuck persona's subject; the first names persona
	// "bad" in its body, which the failing writer cannot store.
	bad := schemas.NewRequest("t-bad", "main", "bad")
	good := schemas.NewRequest("t-good", "main", "stuck")
	for _, req := range []*schemas.PersonaRequest{bad, good} {
		data, err := schemas.Encode(req)
		require.NoError(t, err)
		_, err = b.js.Publish(ctx(t), b.topo.RequestSubject("stuck"), data)
		require.NoError(t, err)
	}
	b.giveUp("stuck", 2)

	l := b.listenerWith(b.failingFor("bad"), time.Second)
	for round := 1; round <= 2; round++ {
		res, err := l.Sweep(ctx(t))
		require.ErrorIs(t, err, advisory.ErrCaptureFailed)
		require.Len(t, res.Failed, 1)
		require.EqualValues(t, 1, res.Failed[0].Seq)
		require.Len(t, res.Captured, round%2, "the good message is captured on the first sweep")
		st, err := b.insp.Stats(ctx(t))
		require.NoError(t, err)
		require.Len(t, st.CaptureFailing, 1)
		require.Equal(t, round, st.CaptureFailing[0].Failures)
		require.Contains(t, st.CaptureFailing[0].Error, "quarantine write failed")
	}
	require.EqualValues(t, 1, b.msgs(b.topo.RequestsStream), "the failing message waits in its stream")

	res, err := b.listenerWith(b.w, time.Second).Sweep(ctx(t))
	require.NoError(t, err)
	require.Len(t, res.Captured, 1)
	st, err := b.insp.Stats(ctx(t))
	require.NoError(t, err)
	require.Empty(t, st.CaptureFailing, "captured: no longer failing")
	require.EqualValues(t, 2, st.Total)
	require.EqualValues(t, 0, b.msgs(b.topo.RequestsStream))
}

// An advisory whose capture keeps failing is retried with a growing
// delay (not every 5 s forever), counted, and the listener keeps
// handling other advisories meanwhile.
func TestFailingAdvisoryIsCountedAndOthersGoOn(t *testing.T) {
	t.Parallel()
	b := newBundle(t)
	bad := schemas.NewRequest("t-bad", "main", "bad")
	good := schemas.NewRequest("t-good", "main", "stuck")
	var seqs []uint64
	for _, req := range []*schemas.PersonaRequest{bad, good} {
		data, err := schemas.Encode(req)
		require.NoError(t, err)
		ack, err := b.js.Publish(ctx(t), b.topo.RequestSubject("stuck"), data)
		require.NoError(t, err)
		seqs = append(seqs, ack.Sequence)
	}
	l := b.listenerWith(b.failingFor("bad"), 50*time.Millisecond)
	c, cancel := context.WithCancel(context.Background())
	defer cancel()
	require.NoError(t, l.Start(c))
	t.Cleanup(l.Stop)
	for _, seq := range seqs { // what the server publishes at MaxDeliver
		adv, err := json.Marshal(advisory.Advisory{Stream: b.topo.RequestsStream, Consumer: "personaq-stuck", StreamSeq: seq, Deliveries: 1, Time: time.Now()})
		require.NoError(t, err)
		_, err = b.js.Publish(ctx(t), "$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES."+b.topo.RequestsStream+".personaq-stuck", adv)
		require.NoError(t, err)
	}
	require.Eventually(t, func() bool {
		st, err := b.insp.Stats(ctx(t))
		require.NoError(t, err)
		return st.Total == 1 && len(st.CaptureFailing) == 1 && st.CaptureFailing[0].Failures >= 3
	}, 10*time.Second, 20*time.Millisecond, "the good one captured, the bad one retried and counted")
	require.EqualValues(t, 1, b.msgs(schemas.DefaultAdvisoryStream), "the failing advisory is kept for its next try")
}
