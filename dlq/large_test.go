package dlq_test

import (
	"bytes"
	"crypto/rand"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/personaq/personaq/dlq"
	"github.com/personaq/personaq/schemas"
)

func randomBytes(t *testing.T, n int) []byte {
	t.Helper()
	b := make([]byte, n)
	_, err := rand.Read(b)
	require.NoError(t, err)
	return b
}

// rawHeaders are headers JSON cannot carry as they are, and one that
// looks like the encoding.
func rawHeaders() map[string][]string {
	return map[string][]string{
		"X-Binary":     {"\xff\xfe\x00ok", "plain"},
		"X-Looks-Like": {dlq.HeaderBase64Prefix + "AAAA"},
		"X-Plain":      {"héllo"},
	}
}

// storedMsgSize is the size of the record message as the server holds it.
func (b *bundle) storedMsgSize(seq uint64) int {
	b.t.Helper()
	s, err := b.js.Stream(ctx(b.t), b.topo.QuarantineStream)
	require.NoError(b.t, err)
	raw, err := s.GetMsg(ctx(b.t), seq)
	require.NoError(b.t, err)
	return len(raw.Data)
}

func (b *bundle) objectExists(ref *schemas.PayloadRef) bool {
	b.t.Helper()
	obs, err := b.js.ObjectStore(ctx(b.t), ref.Bucket)
	require.NoError(b.t, err)
	_, err = obs.GetInfo(ctx(b.t), ref.Name)
	if err != nil {
		require.ErrorIs(b.t, err, jetstream.ErrObjectNotFound)
	}
	return err == nil
}

// The first case: a 900 KB raw body (bigger than a record can
// embed) is quarantined, shown, replayed byte for byte and its object
// removed with the record.
func TestLargeRawPayloadQuarantinedAndReplayedByteForByte(t *testing.T) {
	t.Parallel()
	b := newBundle(t)
	payload := randomBytes(t, 900_000)
	rec := record(t, schemas.ReasonInvalidMessage, "tester", "raw", 31)
	rec.Payload, rec.Headers, rec.RequestID, rec.TaskID = payload, rawHeaders(), "", ""

	seq := b.put(rec)
	require.Equal(t, payload, rec.Payload, "the caller's record is not changed")
	st, err := b.insp.Stats(ctx(t))
	require.NoError(t, err)
	require.GreaterOrEqual(t, st.PayloadBytes, uint64(len(payload)), "stats count the bytes kept out of line")
	require.Less(t, b.storedMsgSize(seq), schemas.MaxPayloadBytes)
	e, err := b.insp.Get(ctx(t), seq)
	require.NoError(t, err)
	require.Empty(t, e.Record.Payload)
	ref := e.Record.PayloadRef
	require.NotNil(t, ref)
	require.Equal(t, schemas.DefaultQuarantinePayloadBucket, ref.Bucket)
	require.EqualValues(t, len(payload), ref.Size)
	require.True(t, strings.HasPrefix(ref.Digest, "SHA-256="), ref.Digest)

	msg, err := b.insp.Message(ctx(t), e.Record)
	require.NoError(t, err)
	require.True(t, bytes.Equal(payload, msg.Data), "payload read back byte for byte")
	require.Equal(t, nats.Header(rawHeaders()), msg.Header)
	require.Equal(t, rec.OriginalSubject, msg.Subject)

	rep, err := b.insp.Replay(ctx(t), dlq.Selection{Seqs: []uint64{seq}}, dlq.ReplayOptions{})
	require.NoError(t, err)
	require.Equal(t, 1, rep.Replayed, "%+v", rep.Items)
	it := rep.Items[0]
	require.True(t, it.Verbatim)
	require.True(t, it.Removed)
	s, err := b.js.Stream(ctx(t), b.topo.RequestsStream)
	require.NoError(t, err)
	raw, err := s.GetMsg(ctx(t), it.PublishedSeq)
	require.NoError(t, err)
	require.True(t, bytes.Equal(payload, raw.Data), "replayed byte for byte")
	for k, v := range rawHeaders() {
		require.Equal(t, v, raw.Header[k], "header %s restored byte for byte", k)
	}
	require.False(t, b.objectExists(ref), "the object goes with its record")
}

// The second case: a valid 460 KB request, which publish accepts,
// is quarantined and replayed with a fresh request id.
func TestLargeValidRequestReplayedWithFreshID(t *testing.T) {
	t.Parallel()
	b := newBundle(t)
	req := schemas.NewRequest("big-task", "main", "tester")
	input, err := json.Marshal(map[string]string{"blob": strings.Repeat("x", 460_000)})
	require.NoError(t, err)
	req.Input = input
	payload, err := schemas.Encode(req)
	require.NoError(t, err)
	rec := record(t, schemas.ReasonExhausted, "tester", "big-task", 32)
	rec.Payload, rec.RequestID = payload, req.RequestID

	seq := b.put(rec)
	e, err := b.insp.Get(ctx(t), seq)
	require.NoError(t, err)
	require.NotNil(t, e.Record.PayloadRef)
	require.Len(t, e.Record.Errors, 2, "small history kept whole")

	rep, err := b.insp.Replay(ctx(t), dlq.Selection{Seqs: []uint64{seq}}, dlq.ReplayOptions{Keep: true})
	require.NoError(t, err)
	require.Equal(t, 1, rep.Replayed, "%+v", rep.Items)
	s, err := b.js.Stream(ctx(t), b.topo.RequestsStream)
	require.NoError(t, err)
	raw, err := s.GetMsg(ctx(t), rep.Items[0].PublishedSeq)
	require.NoError(t, err)
	got, err := schemas.DecodeRequest(raw.Data)
	require.NoError(t, err)
	require.Equal(t, req.RequestID+"-r1", got.RequestID)
	require.Equal(t, string(req.Input), string(got.Input))
	require.True(t, b.objectExists(e.Record.PayloadRef), "--keep keeps the record and its object")
}

func TestPurgeNamesEachRecordOnceAndDeletesItsObject(t *testing.T) {
	t.Parallel()
	b := newBundle(t)
	rec := record(t, schemas.ReasonTerminal, "tester", "t1", 36)
	rec.Payload = randomBytes(t, 700_000)
	seq := b.put(rec)
	small := b.put(record(t, schemas.ReasonTerminal, "tester", "t2", 37))
	e, err := b.insp.Get(ctx(t), seq)
	require.NoError(t, err)
	require.NotNil(t, e.Record.PayloadRef)

	dry, err := b.insp.Purge(ctx(t), dlq.Selection{Seqs: []uint64{seq, seq}}, dlq.PurgeOptions{DryRun: true})
	require.NoError(t, err)
	require.Len(t, dry.Entries, 1, "a sequence named twice is one record")

	rep, err := b.insp.Purge(ctx(t), dlq.Selection{Seqs: []uint64{seq, seq}}, dlq.PurgeOptions{})
	require.NoError(t, err)
	require.Equal(t, 1, rep.Purged)
	require.Zero(t, rep.Failed)
	require.False(t, b.objectExists(e.Record.PayloadRef))
	_, err = b.insp.Get(ctx(t), small)
	require.NoError(t, err, "the other record stays")
	require.EqualValues(t, 1, b.quarantined())
}

// Headers as large as a message can hold go out of line too.
func TestLargeHeadersKeptOutOfLine(t *testing.T) {
	t.Parallel()
	b := newBundle(t)
	rec := record(t, schemas.ReasonInvalidMessage, "tester", "t1", 40)
	rec.Headers = map[string][]string{"X-Huge": {strings.Repeat("h", 600_000)}, "X-Bin": {"\x80"}}
	seq := b.put(rec)
	e, err := b.insp.Get(ctx(t), seq)
	require.NoError(t, err)
	require.NotNil(t, e.Record.HeadersRef)
	require.Empty(t, e.Record.Headers)
	msg, err := b.insp.Message(ctx(t), e.Record)
	require.NoError(t, err)
	require.Equal(t, nats.Header(rec.Headers), msg.Header)
	require.Equal(t, rec.Payload, msg.Data)
}

// An error history too large for one message is trimmed with a marker:
// the first and the latest attempts stay, the count says what went.
func TestLongErrorHistoryTrimmedNotFailed(t *testing.T) {
	t.Parallel()
	b := newBundle(t)
	rec := record(t, schemas.ReasonExhausted, "tester", "t1", 41)
	now := time.Now().UTC()
	rec.Errors = nil
	for n := 1; n <= 400; n++ {
		rec.Errors = append(rec.Errors, schemas.AttemptRecord{Attempt: n, Class: "retryable",
			Error: strings.Repeat("e", 4000), DurationMs: 1, At: now})
	}
	rec.Errors[399].Error = strings.Repeat("z", 2<<20) // one answer of 2 MiB
	rec.Attempts = 400
	rec.Detail = strings.Repeat("d", 1<<20)

	seq := b.put(rec)
	e, err := b.insp.Get(ctx(t), seq)
	require.NoError(t, err)
	got := e.Record
	require.Equal(t, 400, got.Attempts)
	require.Positive(t, got.ErrorsOmitted)
	require.Equal(t, 400, got.ErrorsOmitted+len(got.Errors))
	require.Equal(t, 1, got.Errors[0].Attempt, "the first attempt is kept")
	require.Equal(t, 400, got.Errors[len(got.Errors)-1].Attempt, "the latest attempt is kept")
	require.Contains(t, got.Errors[len(got.Errors)-1].Error, "[trimmed ")
	require.Contains(t, got.Detail, "[trimmed ")
	require.Equal(t, rec.Payload, got.Payload, "a small payload stays inline")
}

// Provenance read from a broken message (a max_deliveries capture reads
// whatever JSON there is) never stops the write.
func TestGarbageProvenanceNeverFailsTheWrite(t *testing.T) {
	t.Parallel()
	b := newBundle(t)
	rec := record(t, schemas.ReasonMaxDeliveries, "tester", "t1", 42)
	rec.Persona, rec.TaskID = "not a token.>", "\xff"+strings.Repeat("t", 5000)
	rec.CorrelationID, rec.Detail = strings.Repeat("c\xfe", 300), ""
	seq := b.put(rec)
	e, err := b.insp.Get(ctx(t), seq)
	require.NoError(t, err)
	require.Equal(t, b.topo.QuarantineSubject(string(schemas.ReasonMaxDeliveries), ""), e.Subject)
	require.NotEmpty(t, e.Record.Detail)
}

func TestMessageReportsMissingAndCorruptObjects(t *testing.T) {
	t.Parallel()
	b := newBundle(t)
	rec := record(t, schemas.ReasonTerminal, "tester", "t1", 43)
	rec.Payload = randomBytes(t, 600_000)
	e, err := b.insp.Get(ctx(t), b.put(rec))
	require.NoError(t, err)
	obs, err := b.js.ObjectStore(ctx(t), e.Record.PayloadRef.Bucket)
	require.NoError(t, err)

	_, err = obs.PutBytes(ctx(t), e.Record.PayloadRef.Name, []byte("something else"))
	require.NoError(t, err)
	_, err = b.insp.Message(ctx(t), e.Record)
	require.ErrorIs(t, err, dlq.ErrPayloadCorrupt)

	require.NoError(t, obs.Delete(ctx(t), e.Record.PayloadRef.Name))
	_, err = b.insp.Message(ctx(t), e.Record)
	require.ErrorIs(t, err, dlq.ErrPayloadMissing)

	rep, err := b.insp.Replay(ctx(t), dlq.Selection{Seqs: []uint64{e.Seq}}, dlq.ReplayOptions{})
	require.NoError(t, err)
	require.Equal(t, 1, rep.Failed, "a replay without its payload fails, it never publishes something else")
	require.Contains(t, rep.Items[0].Err, "missing")
}
