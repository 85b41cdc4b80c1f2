package dlq_test

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/personaq/personaq/consumers"
	"github.com/personaq/personaq/dlq"
	"github.com/personaq/personaq/schemas"
)

func TestWriterStoresEveryReason(t *testing.T) {
	t.Parallel()
	b := newBundle(t)
	for i, reason := range schemas.Reasons {
		rec := record(t, reason, "tester", "task-"+string(reason), uint64(i+1))
		seq := b.put(rec)
		e, err := b.insp.Get(ctx(t), seq)
		require.NoError(t, err)
		require.Equal(t, reason, e.Record.Reason)
		require.Equal(t, b.topo.QuarantineSubject(string(reason), "tester"), e.Subject)
		require.Equal(t, rec.Payload, e.Record.Payload, "payload kept byte for byte")
	}
	require.EqualValues(t, len(schemas.Reasons), b.quarantined())
}

func TestWriterTwoReplicasStoreOneRecord(t *testing.T) {
	t.Parallel()
	b := newBundle(t)
	w2 := dlq.NewWriter(b.nats.JetStream(t), b.topo.QuarantineSubject)
	rec := record(t, schemas.ReasonTerminal, "tester", "t1", 7)
	var wg sync.WaitGroup
	seqs := make([]uint64, 20)
	for i := range seqs {
		w := b.w
		if i%2 == 1 {
			w = w2
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := *rec
			seq, _, err := w.Put(ctx(t), &r)
			require.NoError(t, err)
			seqs[i] = seq
		}()
	}
	wg.Wait()
	require.EqualValues(t, 1, b.quarantined())
	for _, s := range seqs {
		require.Equal(t, seqs[0], s, "every replica learns the one record's sequence")
	}
}

// A retry after the stream's duplicate window (a replica stored the
// record, crashed before acking, and got the message again later) still
// finds the record: the KV index is the second layer.
func TestWriterDedupOutlivesDuplicateWindow(t *testing.T) {
	t.Parallel()
	b := newBundle(t, consumers.Topology{DuplicateWindow: 200 * time.Millisecond})
	rec := record(t, schemas.ReasonExhausted, "tester", "t1", 3)
	seq, dup, err := b.w.Put(ctx(t), rec)
	require.NoError(t, err)
	require.False(t, dup)
	b.waitDuplicateWindow()

	// A writer in another replica, after the window: one record.
	w2 := dlq.NewWriter(b.nats.JetStream(t), b.topo.QuarantineSubject, dlq.WithDuplicateWindow(200*time.Millisecond))
	again := *rec
	seq2, dup, err := w2.Put(ctx(t), &again)
	require.NoError(t, err)
	require.True(t, dup)
	require.Equal(t, seq, seq2)
	require.EqualValues(t, 1, b.msgs(b.topo.QuarantineStream, b.topo.QuarantinePrefix+".exhausted.>"))

	// Without the index, JetStream alone would have stored a second record.
	bare := dlq.NewWriter(b.js, b.topo.QuarantineSubject, dlq.WithoutIndex())
	_, dup, err = bare.Put(ctx(t), &again)
	require.NoError(t, err)
	require.False(t, dup)
	require.EqualValues(t, 2, b.msgs(b.topo.QuarantineStream, b.topo.QuarantinePrefix+".exhausted.>"))
}

// waitDuplicateWindow returns once a message id published now is no
// longer deduplicated, i.e. once everything published before it is out
// of the window.
func (b *bundle) waitDuplicateWindow() {
	b.t.Helper()
	probe := func() *jetstream.PubAck {
		m := &nats.Msg{Subject: b.topo.QuarantinePrefix + ".probe._", Header: nats.Header{}}
		m.Header.Set(jetstream.MsgIDHeader, "probe")
		ack, err := b.js.PublishMsg(ctx(b.t), m)
		require.NoError(b.t, err)
		return ack
	}
	probe()
	require.Eventually(b.t, func() bool { return !probe().Duplicate }, 10*time.Second, 20*time.Millisecond)
	s, err := b.js.Stream(ctx(b.t), b.topo.QuarantineStream)
	require.NoError(b.t, err)
	require.NoError(b.t, s.Purge(ctx(b.t), jetstream.WithPurgeSubject(b.topo.QuarantinePrefix+".probe._")))
}

func TestWriterFillsLineageFromReplayHeaders(t *testing.T) {
	t.Parallel()
	b := newBundle(t)
	rec := record(t, schemas.ReasonTerminal, "tester", "t1", 9)
	rec.Headers = map[string][]string{
		schemas.HeaderReplayOf: {"q.PERSONAQ_REQUESTS.2"}, schemas.HeaderReplayCount: {"2"}, schemas.HeaderOriginalRequestID: {"req-1"},
	}
	e, err := b.insp.Get(ctx(t), b.put(rec))
	require.NoError(t, err)
	require.Equal(t, &schemas.Lineage{ReplayOf: "q.PERSONAQ_REQUESTS.2", ReplayCount: 2, OriginalRequestID: "req-1"}, e.Record.Lineage)
}

// A record id used before for another message (the requests stream was
// recreated and its sequences started over) is not a duplicate.
func TestWriterRecordIDReusedForAnotherMessage(t *testing.T) {
	t.Parallel()
	b := newBundle(t)
	first := record(t, schemas.ReasonTerminal, "tester", "t1", 1)
	second := record(t, schemas.ReasonTerminal, "tester", "t2", 1)
	require.Equal(t, first.ID, second.ID)
	s1 := b.put(first)
	s2, dup, err := b.w.Put(ctx(t), second)
	require.NoError(t, err)
	require.False(t, dup)
	require.NotEqual(t, s1, s2)
	require.EqualValues(t, 2, b.quarantined())
}

// A writer killed between publishing a record and noting it in the index
// leaves only its reservation there. Stored still finds the record on the
// stream — within the duplicate window and past it — and repairs the
// index; a second Put of the same id, even under another reason, stores no
// second record.
func TestStoredFindsRecordWhoseWriterDiedBeforeIndexing(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name        string
		window      time.Duration
		pastWindow  bool
		againReason schemas.Reason
	}{
		{"WithinDuplicateWindow", 0, false, schemas.ReasonTerminal},
		{"PastDuplicateWindow", 200 * time.Millisecond, true, schemas.ReasonTerminal},
		{"PastDuplicateWindowOtherReason", 200 * time.Millisecond, true, schemas.ReasonExhausted},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := newBundle(t, consumers.Topology{DuplicateWindow: tc.window})
			died := errors.New("killed after publishing")
			dying := dlq.NewWriter(b.js, b.topo.QuarantineSubject, dlq.WithDuplicateWindow(b.topo.DuplicateWindow),
				dlq.WithPublishedHook(func() error { return died }))
			rec := record(t, schemas.ReasonTerminal, "tester", "t1", 5)
			_, _, err := dying.Put(ctx(t), rec)
			require.ErrorIs(t, err, died)
			require.ErrorIs(t, err, dlq.ErrWrite)
			require.EqualValues(t, 1, b.quarantined(), "the record was published")
			if tc.pastWindow {
				b.waitDuplicateWindow()
			}

			got, seq, err := b.w.Stored(ctx(t), rec.ID)
			require.NoError(t, err)
			require.NotNil(t, got, "the record is found without its index entry")
			require.Equal(t, rec.ID, got.ID)
			require.Equal(t, rec.RequestID, got.RequestID)

			again := *rec
			again.Reason = tc.againReason
			seq2, dup, err := b.w.Put(ctx(t), &again)
			require.NoError(t, err)
			require.True(t, dup)
			require.Equal(t, seq, seq2)
			require.EqualValues(t, 1, b.quarantined(), "one record")
		})
	}
}

// A reservation whose writer died before publishing is not a record.
func TestStoredIgnoresReservationWithoutRecord(t *testing.T) {
	t.Parallel()
	b := newBundle(t)
	rec := record(t, schemas.ReasonTerminal, "tester", "t1", 6)
	// Reserve through a Put the server refuses (the subject matches no
	// stream), as a writer that died before its publish landed.
	lost := dlq.NewWriter(b.js, func(string, string) string { return "nowhere.x" })
	_, _, err := lost.Put(ctx(t), rec)
	require.Error(t, err)
	got, _, err := b.w.Stored(ctx(t), rec.ID)
	require.NoError(t, err)
	require.Nil(t, got)
	require.EqualValues(t, 0, b.quarantined())
}
