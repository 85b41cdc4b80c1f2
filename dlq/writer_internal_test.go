package dlq

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/personaq/personaq/integration/testenv"
	"github.com/personaq/personaq/schemas"
)

// A writer that published a record and died before noting it in the index
// leaves a reservation; a retry after the duplicate window searches the
// quarantine subject for the id instead of storing a second record.
func TestWriterFindsRecordBehindStaleReservation(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	js := testenv.StartNATS(t).JetStream(t)
	const window = 200 * time.Millisecond
	_, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "Q", Subjects: []string{"q.>"}, Duplicates: window})
	require.NoError(t, err)
	w := NewWriter(js, QuarantineSubjects("q"), WithDuplicateWindow(window))
	rec := &schemas.QuarantineRecord{
		SchemaVersion: schemas.Version, ID: RecordID("R", 1), Reason: schemas.ReasonTerminal, Detail: "d",
		OriginalSubject: "personaq.requests.p", Payload: []byte("{}"), Persona: "p", QuarantinedAt: time.Now().UTC(),
	}
	seq, _, err := w.Put(ctx, rec)
	require.NoError(t, err)
	at := time.Now().UTC()
	require.NoError(t, w.idx.put(ctx, rec.ID, indexEntry{FP: fingerprint(rec.OriginalSubject, rec.Payload), At: at}))

	// Let the JetStream window pass.
	probe := func() bool {
		ack, err := js.PublishMsg(ctx, &nats.Msg{Subject: "q.probe._", Header: nats.Header{jetstream.MsgIDHeader: {"probe"}}})
		require.NoError(t, err)
		return ack.Duplicate
	}
	probe()
	require.Eventually(t, func() bool { return !probe() }, 10*time.Second, 20*time.Millisecond)

	seq2, dup, err := w.Put(ctx, rec)
	require.NoError(t, err)
	require.True(t, dup)
	require.Equal(t, seq, seq2)
	s, err := js.Stream(ctx, "Q")
	require.NoError(t, err)
	info, err := s.Info(ctx, jetstream.WithSubjectFilter("q.terminal.>"))
	require.NoError(t, err)
	require.EqualValues(t, 1, info.State.Subjects["q.terminal.p"])
	e, err := w.idx.get(ctx, rec.ID)
	require.NoError(t, err)
	require.Equal(t, seq, e.Seq, "the search completes the index entry")
}

func TestIndexKeyIsAlwaysValid(t *testing.T) {
	t.Parallel()
	for _, id := range []string{"q.S.1", "c.saga 1.req", ".x", "x.", "ümlaut", string(make([]byte, 600))} {
		require.Regexp(t, `^[-/_=.a-zA-Z0-9]+$`, indexKey(id), id)
	}
}
