package advisory_test

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"

	"github.com/personaq/personaq/consumers"
	"github.com/personaq/personaq/dlq"
	"github.com/personaq/personaq/integration/testenv"
)

// bundle is one test's setup: a JetStream server with personaq's streams
// provisioned, the quarantine's writer and an inspector to read it back.
type bundle struct {
	t    *testing.T
	nats *testenv.NATS
	js   jetstream.JetStream
	topo consumers.Topology
	w    *dlq.Writer
	insp *dlq.Inspector
	log  zerolog.Logger
}

func newBundle(t *testing.T) *bundle {
	t.Helper()
	n := testenv.StartNATS(t)
	b := &bundle{t: t, nats: n, js: n.JetStream(t), topo: consumers.Topology{}.WithDefaults()}
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

// msgs counts the messages of stream (all subjects).
func (b *bundle) msgs(stream string) uint64 {
	b.t.Helper()
	s, err := b.js.Stream(ctx(b.t), stream)
	require.NoError(b.t, err)
	info, err := s.Info(ctx(b.t))
	require.NoError(b.t, err)
	return info.State.Msgs
}

func (b *bundle) quarantined() uint64 { return b.msgs(b.topo.QuarantineStream) }
