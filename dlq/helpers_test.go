package dlq_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"

	"github.com/personaq/personaq/consumers"
	"github.com/personaq/personaq/dlq"
	"github.com/personaq/personaq/integration/testenv"
	"github.com/personaq/personaq/schemas"
)

// bundle is one test's setup: a JetStream server with personaq's streams
// provisioned, a writer and an inspector.
type bundle struct {
	t    *testing.T
	nats *testenv.NATS
	js   jetstream.JetStream
	topo consumers.Topology
	w    *dlq.Writer
	insp *dlq.Inspector
	log  zerolog.Logger
}

func newBundle(t *testing.T, topo ...consumers.Topology) *bundle {
	t.Helper()
	n := testenv.StartNATS(t)
	b := &bundle{t: t, nats: n, js: n.JetStream(t), topo: consumers.Topology{}.WithDefaults()}
	if len(topo) > 0 {
		b.topo = topo[0].WithDefaults()
	}
	b.log = zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.InfoLevel)
	require.NoError(t, consumers.Provision(ctx(t), b.js, b.topo, nil))
	b.w = dlq.NewWriter(b.js, b.topo.QuarantineSubject, dlq.WithDuplicateWindow(b.topo.DuplicateWindow), dlq.WithWriterLogger(&b.log))
	var err error
	b.insp, err = dlq.NewInspector(dlq.InspectorConfig{JetStream: b.js})
	require.NoError(t, err)
	return b
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return c
}

// record returns a valid record for a request of persona and task.
func record(t *testing.T, reason schemas.Reason, persona, task string, seq uint64) *schemas.QuarantineRecord {
	t.Helper()
	req := schemas.NewRequest(task, "main", persona)
	payload, err := schemas.Encode(req)
	require.NoError(t, err)
	now := time.Now().UTC()
	return &schemas.QuarantineRecord{
		SchemaVersion: schemas.Version, ID: dlq.RecordID("PERSONAQ_REQUESTS", seq), Reason: reason,
		Detail: fmt.Sprintf("%s failure of %s", reason, task), OriginalSubject: "personaq.requests." + persona,
		Payload: payload, Stream: "PERSONAQ_REQUESTS", Sequence: seq, Attempts: 2,
		Errors: []schemas.AttemptRecord{
			{Attempt: 1, Class: "retryable", Error: "upstream 503", DurationMs: 12, At: now.Add(-time.Minute)},
			{Attempt: 2, Class: "terminal", Error: "bad answer: " + task, DurationMs: 15, At: now},
		},
		RequestID: req.RequestID, TaskID: task, Step: "main", Persona: persona,
		FirstFailureAt: now.Add(-time.Minute), LastFailureAt: now, QuarantinedAt: now,
	}
}

func (b *bundle) put(rec *schemas.QuarantineRecord) uint64 {
	b.t.Helper()
	seq, _, err := b.w.Put(ctx(b.t), rec)
	require.NoError(b.t, err)
	return seq
}

// msgs counts the messages of stream on subject (all when empty).
func (b *bundle) msgs(stream, subject string) uint64 {
	b.t.Helper()
	s, err := b.js.Stream(ctx(b.t), stream)
	require.NoError(b.t, err)
	if subject == "" {
		info, err := s.Info(ctx(b.t))
		require.NoError(b.t, err)
		return info.State.Msgs
	}
	info, err := s.Info(ctx(b.t), jetstream.WithSubjectFilter(subject))
	require.NoError(b.t, err)
	var n uint64
	for _, c := range info.State.Subjects {
		n += c
	}
	return n
}

func (b *bundle) quarantined() uint64 { return b.msgs(b.topo.QuarantineStream, "") }
