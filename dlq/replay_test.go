package dlq_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/personaq/personaq/consumers"
	"github.com/personaq/personaq/dlq"
	"github.com/personaq/personaq/handlers"
	"github.com/personaq/personaq/retry"
	"github.com/personaq/personaq/schemas"
)

// outcomes follows the outcome events.
type outcomes struct {
	mu   sync.Mutex
	byID map[string]*schemas.OutcomeEvent
}

func (b *bundle) watchOutcomes() *outcomes {
	b.t.Helper()
	o := &outcomes{byID: map[string]*schemas.OutcomeEvent{}}
	cons, err := b.js.OrderedConsumer(ctx(b.t), b.topo.OutcomesStream, jetstream.OrderedConsumerConfig{})
	require.NoError(b.t, err)
	cc, err := cons.Consume(func(m jetstream.Msg) {
		if ev, err := schemas.DecodeOutcome(m.Data()); err == nil {
			o.mu.Lock()
			o.byID[ev.RequestID] = ev
			o.mu.Unlock()
		}
	})
	require.NoError(b.t, err)
	b.t.Cleanup(cc.Stop)
	return o
}

func (o *outcomes) wait(t *testing.T, id string) *schemas.OutcomeEvent {
	t.Helper()
	var ev *schemas.OutcomeEvent
	require.Eventually(t, func() bool {
		o.mu.Lock()
		defer o.mu.Unlock()
		ev = o.byID[id]
		return ev != nil
	}, 20*time.Second, 10*time.Millisecond, "no outcome for %s", id)
	return ev
}

// runtime runs one replica serving persona "replayable": it fails
// terminally unless the request is a replay ("-r1" suffix).
func (b *bundle) runtime() {
	b.t.Helper()
	h := handlers.Func(func(_ context.Context, req *handlers.Request) (handlers.Result, error) {
		if strings.HasSuffix(req.Message.RequestID, "-r1") {
			return handlers.Result{}, nil
		}
		return handlers.Result{}, handlers.Terminal(errors.New("the agent's config was broken"))
	})
	rt, err := consumers.New(consumers.Config{
		WithoutLedger: true, JetStream: b.nats.JetStream(b.t), Logger: &b.log, DrainTimeout: time.Second, FetchMaxWait: 100 * time.Millisecond,
		Personas: []consumers.Persona{{Name: "replayable", Handler: h, Concurrency: 4,
			Policy: retry.Policy{Name: "test", MaxAttempts: 3, AttemptTimeout: 2 * time.Second, Schedule: retry.Fixed{Every: 10 * time.Millisecond}}}},
	})
	require.NoError(b.t, err)
	c, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- rt.Run(c) }()
	b.t.Cleanup(func() { cancel(); <-done })
}

// Quarantined → replayed → succeeds, through the real runtime.
func TestReplayRoundTrip(t *testing.T) {
	t.Parallel()
	b := newBundle(t)
	out := b.watchOutcomes()
	b.runtime()
	req := schemas.NewRequest("task-rt", "main", "replayable")
	_, err := consumers.PublishRequest(ctx(t), b.js, b.topo, req)
	require.NoError(t, err)
	ev := out.wait(t, req.RequestID)
	require.Equal(t, schemas.OutcomeQuarantined, ev.Outcome)
	require.Equal(t, schemas.ReasonTerminal, ev.Reason)

	rep, err := b.insp.Replay(ctx(t), dlq.Selection{Seqs: []uint64{ev.QuarantineSeq}}, dlq.ReplayOptions{})
	require.NoError(t, err)
	require.Equal(t, 1, rep.Replayed)
	it := rep.Items[0]
	require.Equal(t, req.RequestID+"-r1", it.NewRequestID)
	require.True(t, it.Removed)

	ev2 := out.wait(t, req.RequestID+"-r1")
	require.Equal(t, schemas.OutcomeSucceeded, ev2.Outcome)
	require.Equal(t, ev.CorrelationID, ev2.CorrelationID, "the correlation survives the replay")
	require.Equal(t, 1, ev2.Attempts, "a fresh attempt count")
	_, err = b.insp.Get(ctx(t), ev.QuarantineSeq)
	require.ErrorIs(t, err, dlq.ErrNotFound, "record removed after the replay")
	require.EqualValues(t, 0, b.quarantined())
}

// A replay that fails again is quarantined with its lineage; replaying
// that record counts on from the original request id.
func TestReplayLineage(t *testing.T) {
	t.Parallel()
	b := newBundle(t)
	rec := record(t, schemas.ReasonTerminal, "tester", "t1", 100)
	seq := b.put(rec)
	rep, err := b.insp.Replay(ctx(t), dlq.Selection{Seqs: []uint64{seq}}, dlq.ReplayOptions{})
	require.NoError(t, err)
	it := rep.Items[0]

	s, err := b.js.Stream(ctx(t), b.topo.RequestsStream)
	require.NoError(t, err)
	raw, err := s.GetMsg(ctx(t), it.PublishedSeq)
	require.NoError(t, err)
	require.Equal(t, rec.ID, raw.Header.Get(schemas.HeaderReplayOf))
	require.Equal(t, "1", raw.Header.Get(schemas.HeaderReplayCount))
	require.Equal(t, rec.RequestID, raw.Header.Get(schemas.HeaderOriginalRequestID))
	require.Equal(t, "replay."+rec.ID+".1", raw.Header.Get(jetstream.MsgIDHeader))
	require.Empty(t, raw.Header.Get(schemas.HeaderCorrelationID), "none to keep")
	got, err := schemas.DecodeRequest(raw.Data)
	require.NoError(t, err)
	orig, err := schemas.DecodeRequest(rec.Payload)
	require.NoError(t, err)
	orig.RequestID = rec.RequestID + "-r1"
	require.Equal(t, orig, got, "only the request id changed")

	// The replay fails again: the runtime's record keeps its headers.
	again := record(t, schemas.ReasonExhausted, "tester", "t1", it.PublishedSeq)
	again.Payload, again.RequestID, again.Headers = raw.Data, got.RequestID, map[string][]string(raw.Header)
	seq2 := b.put(again)
	e, err := b.insp.Get(ctx(t), seq2)
	require.NoError(t, err)
	require.Equal(t, &schemas.Lineage{ReplayOf: rec.ID, ReplayCount: 1, OriginalRequestID: rec.RequestID}, e.Record.Lineage)
	rep, err = b.insp.Replay(ctx(t), dlq.Selection{Seqs: []uint64{seq2}}, dlq.ReplayOptions{})
	require.NoError(t, err)
	require.Equal(t, rec.RequestID+"-r2", rep.Items[0].NewRequestID)
	require.Equal(t, 2, rep.Items[0].ReplayCount)
}

// Replaying the same record twice publishes once, even with --keep and
// after the stream's duplicate window.
func TestReplayIsIdempotent(t *testing.T) {
	t.Parallel()
	b := newBundle(t, consumers.Topology{DuplicateWindow: 200 * time.Millisecond})
	seq := b.put(record(t, schemas.ReasonTerminal, "tester", "t1", 1))
	sel := dlq.Selection{Seqs: []uint64{seq}}
	first, err := b.insp.Replay(ctx(t), sel, dlq.ReplayOptions{Keep: true})
	require.NoError(t, err)
	require.Equal(t, 1, first.Replayed)
	require.False(t, first.Items[0].Removed)

	b.waitRequestsWindow()
	second, err := b.insp.Replay(ctx(t), sel, dlq.ReplayOptions{Keep: true})
	require.NoError(t, err)
	require.Equal(t, 0, second.Replayed)
	require.Equal(t, 1, second.Duplicates)
	require.Equal(t, first.Items[0].PublishedSeq, second.Items[0].PublishedSeq)
	require.EqualValues(t, 1, b.msgs(b.topo.RequestsStream, ""), "published once")
	require.EqualValues(t, 1, b.quarantined(), "kept")
}

func (b *bundle) waitRequestsWindow() {
	b.t.Helper()
	probe := func() bool {
		m := &nats.Msg{Subject: b.topo.RequestsPrefix + ".probe", Header: nats.Header{jetstream.MsgIDHeader: {"probe"}}}
		ack, err := b.js.PublishMsg(ctx(b.t), m)
		require.NoError(b.t, err)
		return ack.Duplicate
	}
	probe()
	require.Eventually(b.t, func() bool { return !probe() }, 10*time.Second, 20*time.Millisecond)
	s, err := b.js.Stream(ctx(b.t), b.topo.RequestsStream)
	require.NoError(b.t, err)
	require.NoError(b.t, s.Purge(ctx(b.t), jetstream.WithPurgeSubject(b.topo.RequestsPrefix+".probe")))
}

// An invalid_message record goes out byte for byte, with a warning.
func TestReplayInvalidMessageVerbatim(t *testing.T) {
	t.Parallel()
	b := newBundle(t)
	rec := record(t, schemas.ReasonInvalidMessage, "tester", "t1", 1)
	rec.Payload, rec.RequestID = []byte(`{"not":"a request"`), ""
	seq := b.put(rec)

	dry, err := b.insp.Replay(ctx(t), dlq.Selection{Seqs: []uint64{seq}}, dlq.ReplayOptions{DryRun: true})
	require.NoError(t, err)
	require.True(t, dry.Items[0].Verbatim)
	require.Contains(t, dry.Items[0].Note, "invalid_message")
	require.EqualValues(t, 0, b.msgs(b.topo.RequestsStream, ""), "dry run publishes nothing")
	require.EqualValues(t, 1, b.quarantined(), "dry run removes nothing")

	rep, err := b.insp.Replay(ctx(t), dlq.Selection{Seqs: []uint64{seq}}, dlq.ReplayOptions{})
	require.NoError(t, err)
	s, err := b.js.Stream(ctx(t), b.topo.RequestsStream)
	require.NoError(t, err)
	raw, err := s.GetMsg(ctx(t), rep.Items[0].PublishedSeq)
	require.NoError(t, err)
	require.Equal(t, rec.Payload, raw.Data)
	require.Equal(t, rec.OriginalSubject, raw.Subject)
}

func TestReplayByFilterWithRate(t *testing.T) {
	t.Parallel()
	b := newBundle(t)
	b.seed()
	var progress []int
	start := time.Now()
	rep, err := b.insp.Replay(ctx(t), dlq.Selection{Filter: dlq.Filter{Reasons: []schemas.Reason{schemas.ReasonTerminal}}},
		dlq.ReplayOptions{Rate: 20, Progress: func(done, _ int) { progress = append(progress, done) }})
	require.NoError(t, err)
	require.Equal(t, 3, rep.Replayed)
	require.Equal(t, 3, rep.Removed)
	require.Equal(t, []int{1, 2, 3}, progress)
	require.GreaterOrEqual(t, time.Since(start), 90*time.Millisecond, "3 at 20/s take at least 2 intervals")
	n, err := b.insp.Count(ctx(t), dlq.Filter{Reasons: []schemas.Reason{schemas.ReasonTerminal}})
	require.NoError(t, err)
	require.Zero(t, n)
	require.EqualValues(t, 3, b.msgs(b.topo.RequestsStream, ""))
}

func TestPurge(t *testing.T) {
	t.Parallel()
	b := newBundle(t)
	seqs := b.seed()
	sel := dlq.Selection{Filter: dlq.Filter{Persona: "planner"}}
	dry, err := b.insp.Purge(ctx(t), sel, dlq.PurgeOptions{DryRun: true})
	require.NoError(t, err)
	require.Len(t, dry.Entries, 2)
	require.EqualValues(t, len(seqs), b.quarantined())

	rep, err := b.insp.Purge(ctx(t), sel, dlq.PurgeOptions{})
	require.NoError(t, err)
	require.Equal(t, 2, rep.Purged)
	require.EqualValues(t, len(seqs)-2, b.quarantined())

	rep, err = b.insp.Purge(ctx(t), dlq.Selection{Seqs: []uint64{seqs[0]}}, dlq.PurgeOptions{})
	require.NoError(t, err)
	require.Equal(t, 1, rep.Purged)
	_, err = b.insp.Purge(ctx(t), dlq.Selection{Seqs: []uint64{seqs[0]}}, dlq.PurgeOptions{})
	require.ErrorIs(t, err, dlq.ErrNotFound)
}

// The replay keeps every byte of the payload but the request id's value.
func TestReplayRewritesOnlyTheRequestID(t *testing.T) {
	t.Parallel()
	b := newBundle(t)
	rec := record(t, schemas.ReasonTerminal, "tester", "t1", 100)
	rec.Payload = []byte(`{ "schema_version": 1, "task_id": "t1",  "request_id" :  "abc", "step": "main", "persona": "tester", "created_at": "2026-01-02T03:04:05Z" }`)
	rec.RequestID = "abc"
	rep, err := b.insp.Replay(ctx(t), dlq.Selection{Seqs: []uint64{b.put(rec)}}, dlq.ReplayOptions{})
	require.NoError(t, err)
	s, err := b.js.Stream(ctx(t), b.topo.RequestsStream)
	require.NoError(t, err)
	raw, err := s.GetMsg(ctx(t), rep.Items[0].PublishedSeq)
	require.NoError(t, err)
	require.Equal(t, `{ "schema_version": 1, "task_id": "t1",  "request_id" :  "abc-r1", "step": "main", "persona": "tester", "created_at": "2026-01-02T03:04:05Z" }`, string(raw.Data))
}
