package consumers_test

// Tests of how JetStream and nats.go behave, for each fact the runtime
// relies on (DESIGN.md, "How the broker and client really behave").

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/personaq/personaq/consumers"
	"github.com/personaq/personaq/consumers/streams"
	"github.com/personaq/personaq/consumers/transport"
	"github.com/personaq/personaq/consumers/wire"
	"github.com/personaq/personaq/integration/testenv"
)

func factStream(t *testing.T, name string, retention jetstream.RetentionPolicy) (jetstream.JetStream, jetstream.Stream) {
	t.Helper()
	js := testenv.StartNATS(t).JetStream(t)
	s, err := js.CreateStream(context.Background(), jetstream.StreamConfig{
		Name: name, Subjects: []string{name + ".>"}, Retention: retention,
	})
	require.NoError(t, err)
	return js, s
}

func durable(t *testing.T, s jetstream.Stream, cfg jetstream.ConsumerConfig) jetstream.Consumer {
	t.Helper()
	cfg.AckPolicy = jetstream.AckExplicitPolicy
	c, err := s.CreateOrUpdateConsumer(context.Background(), cfg)
	require.NoError(t, err)
	return c
}

func next(t *testing.T, c jetstream.Consumer, wait time.Duration) (jetstream.Msg, time.Time) {
	t.Helper()
	m, err := c.Next(jetstream.FetchMaxWait(wait))
	require.NoError(t, err)
	return m, time.Now()
}

func publishN(t *testing.T, js jetstream.JetStream, subject string, n int) {
	t.Helper()
	for range n {
		_, err := js.Publish(context.Background(), subject, []byte("x"))
		require.NoError(t, err)
	}
}

// NakWithDelay(d) on a consumer with AckWait only comes back after d, not
// before: retry delays can be NakWithDelay.
func TestFactNakWithDelayRedeliversAfterTheDelay(t *testing.T) {
	t.Parallel()
	js, s := factStream(t, "F1", jetstream.WorkQueuePolicy)
	c := durable(t, s, jetstream.ConsumerConfig{Durable: "d", AckWait: 5 * time.Second})
	publishN(t, js, "F1.x", 1)
	m, _ := next(t, c, time.Second)
	const d = 300 * time.Millisecond
	require.NoError(t, m.NakWithDelay(d))
	naked := time.Now()
	m2, at := next(t, c, 5*time.Second)
	require.GreaterOrEqual(t, at.Sub(naked), d)
	require.Less(t, at.Sub(naked), d+time.Second)
	md, err := m2.Metadata()
	require.NoError(t, err)
	require.EqualValues(t, 2, md.NumDelivered)
}

// With a BackOff list the same NakWithDelay comes back later and later
// (d + BackOff[n] − BackOff[0], nats-server#4726): Provision never sets it.
func TestFactBackOffShiftsNakWithDelay(t *testing.T) {
	t.Parallel()
	js, s := factStream(t, "F2", jetstream.WorkQueuePolicy)
	c := durable(t, s, jetstream.ConsumerConfig{Durable: "d", MaxDeliver: 10,
		BackOff: []time.Duration{500 * time.Millisecond, 2 * time.Second, 4 * time.Second}})
	publishN(t, js, "F2.x", 1)
	const d = 100 * time.Millisecond
	var gaps []time.Duration
	m, _ := next(t, c, time.Second)
	for range 2 {
		require.NoError(t, m.NakWithDelay(d))
		naked := time.Now()
		var at time.Time
		m, at = next(t, c, 10*time.Second)
		gaps = append(gaps, at.Sub(naked))
	}
	require.Less(t, gaps[0], time.Second, "first nak honours d")
	require.Greater(t, gaps[1], time.Second, "second nak is pushed out by the BackOff list: %v", gaps)
}

func TestProvisionSetsNoBackOffAndSharedMaxAckPending(t *testing.T) {
	t.Parallel()
	js := testenv.StartNATS(t).JetStream(t)
	spec := consumers.ConsumerSpec{Persona: "p", AckWait: time.Second, MaxAckPending: 64}
	require.NoError(t, consumers.Provision(context.Background(), js, wire.Topology{}, []consumers.ConsumerSpec{spec}))
	require.NoError(t, consumers.Provision(context.Background(), js, wire.Topology{}, []consumers.ConsumerSpec{spec}), "idempotent")
	c, err := js.Consumer(context.Background(), "PERSONAQ_REQUESTS", wire.Durable("p"))
	require.NoError(t, err)
	cfg := c.CachedInfo().Config
	require.Empty(t, cfg.BackOff)
	require.Equal(t, 64, cfg.MaxAckPending)
	require.Equal(t, "personaq.requests.p", cfg.FilterSubject)
	q, err := js.Stream(context.Background(), "PERSONAQ_QUARANTINE")
	require.NoError(t, err)
	require.Equal(t, jetstream.LimitsPolicy, q.CachedInfo().Config.Retention, "quarantine is browsable, not a work queue")
}

// InProgress resets the AckWait clock: heartbeats keep a long attempt.
func TestFactInProgressPreventsRedelivery(t *testing.T) {
	t.Parallel()
	js, s := factStream(t, "F3", jetstream.WorkQueuePolicy)
	c := durable(t, s, jetstream.ConsumerConfig{Durable: "d", AckWait: 300 * time.Millisecond})
	publishN(t, js, "F3.x", 1)
	m, _ := next(t, c, time.Second)
	for range 6 { // 1.2s, four AckWaits
		time.Sleep(200 * time.Millisecond)
		require.NoError(t, m.InProgress())
	}
	_, err := c.Next(jetstream.FetchMaxWait(200 * time.Millisecond))
	require.ErrorIs(t, err, nats.ErrTimeout, "not redelivered while heartbeats flow")
	require.NoError(t, m.DoubleAck(context.Background()))
}

// Term counts as an ack: a work-queue stream deletes the message, so the
// quarantine record must be stored first.
func TestFactTermDeletesFromWorkQueue(t *testing.T) {
	t.Parallel()
	js, s := factStream(t, "F4", jetstream.WorkQueuePolicy)
	c := durable(t, s, jetstream.ConsumerConfig{Durable: "d", AckWait: time.Second})
	publishN(t, js, "F4.x", 1)
	m, _ := next(t, c, time.Second)
	require.NoError(t, m.TermWithReason("test"))
	require.Eventually(t, func() bool {
		info, err := s.Info(context.Background())
		return err == nil && info.State.Msgs == 0
	}, 2*time.Second, 10*time.Millisecond)
}

// MaxAckPending is per consumer, shared by every replica pulling from it.
func TestFactMaxAckPendingIsSharedByReplicas(t *testing.T) {
	t.Parallel()
	js, s := factStream(t, "F5", jetstream.WorkQueuePolicy)
	durable(t, s, jetstream.ConsumerConfig{Durable: "d", AckWait: 5 * time.Second, MaxAckPending: 3})
	publishN(t, js, "F5.x", 10)
	total := 0
	for range 2 { // two "replicas", separate consumer handles
		c, err := js.Consumer(context.Background(), "F5", "d")
		require.NoError(t, err)
		b, err := c.Fetch(5, jetstream.FetchMaxWait(300*time.Millisecond))
		require.NoError(t, err)
		for range b.Messages() {
			total++
		}
	}
	require.Equal(t, 3, total, "both replicas together got MaxAckPending messages")
}

// Nats-Msg-Id deduplicates within the stream's duplicate window.
func TestFactMsgIDDeduplicates(t *testing.T) {
	t.Parallel()
	js, _ := factStream(t, "F6", jetstream.LimitsPolicy)
	for i, wantDup := range []bool{false, true} {
		ack, err := js.Publish(context.Background(), "F6.x", []byte("x"), jetstream.WithMsgID("same"))
		require.NoError(t, err)
		require.Equal(t, wantDup, ack.Duplicate, "publish %d", i+1)
	}
}

// The subscriber never holds more messages than it has free slots, so no
// message waits in a client buffer while its AckWait runs (nats.go#1929).
func TestSubscriberFetchesNoMoreThanFreeSlots(t *testing.T) {
	t.Parallel()
	js := testenv.StartNATS(t).JetStream(t)
	spec := consumers.ConsumerSpec{Persona: "p", AckWait: 5 * time.Second, MaxAckPending: 100}
	require.NoError(t, consumers.Provision(context.Background(), js, wire.Topology{}, []consumers.ConsumerSpec{spec}))
	publishN(t, js, "personaq.requests.p", 10)
	sub, err := transport.NewSubscriber(transport.Config{JetStream: js, Stream: "PERSONAQ_REQUESTS", Slots: 2, FetchMaxWait: 100 * time.Millisecond})
	require.NoError(t, err)
	ch, err := sub.Subscribe(context.Background(), "p")
	require.NoError(t, err)
	first, second := <-ch, <-ch // hold both slots without settling
	c, err := js.Consumer(context.Background(), "PERSONAQ_REQUESTS", wire.Durable("p"))
	require.NoError(t, err)
	require.Never(t, func() bool {
		info, err := c.Info(context.Background())
		return err != nil || info.NumAckPending > 2
	}, 500*time.Millisecond, 50*time.Millisecond)
	ack := func(msg *message.Message) {
		d, ok := transport.DeliveryFrom(msg.Context())
		require.True(t, ok)
		require.NoError(t, d.Ack())
	}
	ack(first)
	ack(second)
	got := 2
	for got < 10 {
		ack(<-ch)
		got++
	}
	require.NoError(t, sub.Close())
}

// A publish with "Nats-Expected-Last-Subject-Sequence: 0" checked against a
// wildcard subject (Nats-Expected-Last-Subject-Sequence-Subject) is a
// create-once across every subject the wildcard matches: of many writers
// racing with different subjects, exactly one is stored and the others get
// JSErrCodeStreamWrongLastSequence; a last-by-subject get with the same
// wildcard reads the one stored. Terminal records rely on both.
func TestFactCreateOnceAcrossSubjectsWithAWildcardCheck(t *testing.T) {
	t.Parallel()
	js, s := factStream(t, "F9", jetstream.LimitsPolicy)
	const writers = 8
	var wg sync.WaitGroup
	errs := make([]error, writers)
	for i := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			subj := fmt.Sprintf("F9.outcome%d.persona.req-1", i)
			_, errs[i] = js.Publish(context.Background(), subj, []byte(subj),
				jetstream.WithExpectLastSequenceForSubject(0, "F9.*.*.req-1"))
		}()
	}
	wg.Wait()
	stored := ""
	for i, err := range errs {
		if err == nil {
			require.Empty(t, stored, "a second writer was stored")
			stored = fmt.Sprintf("F9.outcome%d.persona.req-1", i)
			continue
		}
		var apiErr *jetstream.APIError
		require.ErrorAs(t, err, &apiErr)
		require.Equal(t, jetstream.JSErrCodeStreamWrongLastSequence, apiErr.ErrorCode)
	}
	require.NotEmpty(t, stored)
	raw, err := s.GetLastMsgForSubject(context.Background(), "F9.*.*.req-1")
	require.NoError(t, err)
	require.Equal(t, stored, raw.Subject)
	_, err = s.GetLastMsgForSubject(context.Background(), "F9.*.*.req-2")
	require.ErrorIs(t, err, jetstream.ErrMsgNotFound)
	// Another request's record is its own create-once.
	_, err = js.Publish(context.Background(), "F9.succeeded.persona.req-2", nil, jetstream.WithExpectLastSequenceForSubject(0, "F9.*.*.req-2"))
	require.NoError(t, err)
}

// A settle sent as a request is answered by the server — which is how the
// runtime confirms it — and so is the same settle sent again, as the
// runtime does when no answer came in a failover. The repeat acts on
// whatever delivery of that stream sequence is current: a repeated nak
// after the message was delivered again nak's the new delivery. That is
// why a settle is repeated only while its claim holds (no other delivery
// can exist then), and an ack of a message no longer pending is harmless.
func TestFactSettleRequestsAreAnsweredAndRepeatable(t *testing.T) {
	t.Parallel()
	js, s := factStream(t, "F9", jetstream.WorkQueuePolicy)
	c := durable(t, s, jetstream.ConsumerConfig{Durable: "d", AckWait: 5 * time.Second})
	publishN(t, js, "F9.x", 1)
	m, _ := next(t, c, time.Second)
	nc := js.Conn()
	_, err := nc.Request(m.Reply(), []byte("-NAK"), time.Second)
	require.NoError(t, err, "a nak sent as a request is answered")
	again, _ := next(t, c, time.Second)
	_, err = nc.Request(m.Reply(), []byte("-NAK"), time.Second)
	require.NoError(t, err, "a repeated nak is answered")
	// nats-server matches a settle by stream sequence: the repeat hit the
	// current delivery.
	third, _ := next(t, c, time.Second)
	require.Equal(t, mustMeta(t, again).Sequence.Stream, mustMeta(t, third).Sequence.Stream)
	_, err = nc.Request(third.Reply(), []byte("+ACK"), time.Second)
	require.NoError(t, err)
	_, err = nc.Request(third.Reply(), []byte("+ACK"), time.Second)
	require.NoError(t, err, "an ack of a message no longer pending is answered")
	_, err = c.Next(jetstream.FetchMaxWait(300 * time.Millisecond))
	require.ErrorIs(t, err, nats.ErrTimeout, "acked once for good")
}

func mustMeta(t *testing.T, m jetstream.Msg) *jetstream.MsgMetadata {
	t.Helper()
	md, err := m.Metadata()
	require.NoError(t, err)
	return md
}

// fileStream creates a file-storage stream (the server's default, and
// testenv syncs every write) named name on subjects name.>, as cfg says.
func fileStream(t *testing.T, js jetstream.JetStream, cfg jetstream.StreamConfig) jetstream.Stream {
	t.Helper()
	cfg.Subjects = []string{cfg.Name + ".>"}
	cfg.Storage = jetstream.FileStorage
	s, err := js.CreateStream(context.Background(), cfg)
	require.NoError(t, err)
	return s
}

// An ack on a limits-retention stream keeps the message stored and
// advances the consumer's ack floor: the request stream's acks write no
// delete marker (no fsync), and the trimmer learns from the ack floor what
// may be purged.
func TestFactAckOnLimitsStreamKeepsMessageAndAdvancesAckFloor(t *testing.T) {
	t.Parallel()
	js := testenv.StartNATS(t).JetStream(t)
	s := fileStream(t, js, jetstream.StreamConfig{Name: "F10", Retention: jetstream.LimitsPolicy})
	c := durable(t, s, jetstream.ConsumerConfig{Durable: "d", AckWait: 5 * time.Second, FilterSubject: "F10.p"})
	publishN(t, js, "F10.p", 3)
	for range 2 {
		m, _ := next(t, c, time.Second)
		require.NoError(t, m.DoubleAck(context.Background()))
	}
	ci, err := c.Info(context.Background())
	require.NoError(t, err)
	require.EqualValues(t, 2, ci.AckFloor.Stream, "the ack floor is the last acked sequence")
	si, err := s.Info(context.Background())
	require.NoError(t, err)
	require.EqualValues(t, 3, si.State.Msgs, "acked messages stay stored")
}

// A purge with a subject filter and a sequence removes that subject's
// messages below the sequence and keeps everything at or after it, and
// every other subject: the trimmer's one call per persona.
func TestFactPurgeBySubjectUpToSequenceKeepsTheRest(t *testing.T) {
	t.Parallel()
	js := testenv.StartNATS(t).JetStream(t)
	s := fileStream(t, js, jetstream.StreamConfig{Name: "F11", Retention: jetstream.LimitsPolicy})
	for range 4 { // a at 1,3,5,7; b at 2,4,6,8
		publishN(t, js, "F11.a", 1)
		publishN(t, js, "F11.b", 1)
	}
	require.NoError(t, s.Purge(context.Background(), jetstream.WithPurgeSubject("F11.a"), jetstream.WithPurgeSequence(5)))
	var kept []uint64
	for seq := uint64(1); seq <= 8; seq++ {
		if _, err := s.GetMsg(context.Background(), seq); err == nil {
			kept = append(kept, seq)
		} else {
			require.ErrorIs(t, err, jetstream.ErrMsgNotFound)
		}
	}
	require.Equal(t, []uint64{2, 4, 5, 6, 7, 8}, kept)
}

// batchRecord is a terminal-record-shaped message for the batch facts: a
// create-once expectation on the request's wildcard subject.
func batchRecord(stream, outcome, req string) *nats.Msg {
	m := nats.NewMsg(fmt.Sprintf("%s.%s.p.%s", stream, outcome, req))
	m.Data = []byte(outcome)
	m.Header.Set(jetstream.ExpectedLastSubjSeqHeader, "0")
	m.Header.Set(jetstream.ExpectedLastSubjSeqSubjHeader, fmt.Sprintf("%s.*.*.%s", stream, req))
	return m
}

// An atomic batch commits all or nothing, and one failed create-once
// expectation rejects the whole batch with the single publish's error
// code: the batcher falls back to per-record writes so one duplicate never
// fails the others.
func TestFactAtomicBatchIsAllOrNothingUnderCreateOnce(t *testing.T) {
	t.Parallel()
	js := testenv.StartNATS(t).JetStream(t)
	s := fileStream(t, js, jetstream.StreamConfig{Name: "F12", AllowAtomicPublish: true})
	ctx := context.Background()
	ack, err := streams.PublishAtomic(ctx, js.Conn(), []*nats.Msg{
		batchRecord("F12", "succeeded", "r1"), batchRecord("F12", "succeeded", "r2"), batchRecord("F12", "quarantined", "r3"),
	})
	require.NoError(t, err)
	require.Equal(t, 3, ack.BatchSize)
	require.EqualValues(t, 3, ack.Sequence)

	_, err = streams.PublishAtomic(ctx, js.Conn(), []*nats.Msg{
		batchRecord("F12", "succeeded", "r4"), batchRecord("F12", "cancelled", "r2"), batchRecord("F12", "succeeded", "r5"),
	})
	var apiErr *jetstream.APIError
	require.ErrorAs(t, err, &apiErr)
	require.Equal(t, jetstream.JSErrCodeStreamWrongLastSequence, apiErr.ErrorCode, "the duplicate's own error, for the whole batch")
	info, err := s.Info(ctx)
	require.NoError(t, err)
	require.EqualValues(t, 3, info.State.Msgs, "nothing of the rejected batch is stored")
	_, err = s.GetLastMsgForSubject(ctx, "F12.*.*.r4")
	require.ErrorIs(t, err, jetstream.ErrMsgNotFound)
}

// Inside one batch the server checks an expectation on a subject once and
// reuses the answer (server/jetstream_batching.go, expectedPerSubject): two
// records of the same request in one batch are both stored. The batcher
// must never put two records of one request in the same batch.
func TestFactAtomicBatchDoesNotCheckOneRequestTwice(t *testing.T) {
	t.Parallel()
	js := testenv.StartNATS(t).JetStream(t)
	s := fileStream(t, js, jetstream.StreamConfig{Name: "F13", AllowAtomicPublish: true})
	_, err := streams.PublishAtomic(context.Background(), js.Conn(), []*nats.Msg{
		batchRecord("F13", "succeeded", "r1"), batchRecord("F13", "cancelled", "r1"),
	})
	require.NoError(t, err)
	info, err := s.Info(context.Background())
	require.NoError(t, err)
	require.EqualValues(t, 2, info.State.Msgs, "two terminal records of one request: why the batcher keeps one per batch")
}

// A stream without allow_atomic refuses a batch with its own error code
// (the commit is checked before anything else), and stores nothing.
func TestFactAtomicBatchRefusedWithoutAllowAtomic(t *testing.T) {
	t.Parallel()
	js := testenv.StartNATS(t).JetStream(t)
	s := fileStream(t, js, jetstream.StreamConfig{Name: "F14"})
	_, err := streams.PublishAtomic(context.Background(), js.Conn(), []*nats.Msg{
		batchRecord("F14", "succeeded", "r1"), batchRecord("F14", "succeeded", "r2"),
	})
	require.True(t, streams.IsAPIError(err, streams.ErrCodeAtomicPublishDisabled), "got %v", err)
	info, err := s.Info(context.Background())
	require.NoError(t, err)
	require.Zero(t, info.State.Msgs)
}

// A work-queue stream's retention cannot be changed in place (server
// stream.go: "can not change retention policy to/from workqueue"): an
// existing deployment's request stream moves to limits retention by
// migration, never by an update.
func TestFactWorkQueueRetentionCannotChangeInPlace(t *testing.T) {
	t.Parallel()
	js, s := factStream(t, "F15", jetstream.WorkQueuePolicy)
	cfg := s.CachedInfo().Config
	cfg.Retention = jetstream.LimitsPolicy
	_, err := js.UpdateStream(context.Background(), cfg)
	require.True(t, streams.IsAPIError(err, streams.ErrCodeStreamInvalidConfig), "got %v", err)
}

// On a limits stream the ack floor also moves past a message given up at
// MaxDeliver, which nobody acked and which is still stored (server
// consumer.go, hasMaxDeliveries → moveAckFloor). So the ack floor alone
// does not say "handled": the trimmer keeps every message whose
// MAX_DELIVERIES advisory still waits for the quarantine listener.
func TestFactAckFloorPassesMessagesGivenUpAtMaxDeliver(t *testing.T) {
	t.Parallel()
	js := testenv.StartNATS(t).JetStream(t)
	s := fileStream(t, js, jetstream.StreamConfig{Name: "F16", Retention: jetstream.LimitsPolicy})
	c := durable(t, s, jetstream.ConsumerConfig{Durable: "d", AckWait: 200 * time.Millisecond, MaxDeliver: 1})
	publishN(t, js, "F16.p", 2)
	_, _ = next(t, c, time.Second) // seq 1: never acked
	m, _ := next(t, c, time.Second)
	require.NoError(t, m.DoubleAck(context.Background()))
	require.Eventually(t, func() bool {
		// A pull makes the server look at its redeliveries, where it finds
		// seq 1 past MaxDeliver.
		_, _ = c.Next(jetstream.FetchMaxWait(50 * time.Millisecond))
		ci, err := c.Info(context.Background())
		return err == nil && ci.NumAckPending == 0
	}, 5*time.Second, 20*time.Millisecond, "seq 1 given up")
	publishN(t, js, "F16.p", 1)
	m, _ = next(t, c, time.Second)
	require.NoError(t, m.DoubleAck(context.Background()))
	ci, err := c.Info(context.Background())
	require.NoError(t, err)
	t.Logf("floor %+v", ci.AckFloor)
	require.EqualValues(t, 3, ci.AckFloor.Stream, "the next ack moves the floor past the given-up seq 1")
	_, err = s.GetMsg(context.Background(), 1)
	require.NoError(t, err, "and it is still stored")
}

// straceNATS is a nats-server process (built from the module this
// repository pins) running under strace, which logs every fsync and
// fdatasync it makes; fsyncs counts them so far.
type straceNATS struct {
	url string
	log string
}

func (s *straceNATS) fsyncs(t testing.TB) int {
	t.Helper()
	raw, err := os.ReadFile(s.log)
	require.NoError(t, err)
	n := 0
	for _, line := range strings.Split(string(raw), "\n") {
		if strings.Contains(line, "fsync(") || strings.Contains(line, "fdatasync(") {
			n++
		}
	}
	return n
}

func startStraceNATS(t testing.TB) *straceNATS {
	t.Helper()
	strace, err := exec.LookPath("strace")
	if err != nil {
		if os.Getenv("CI") == "" {
			t.Skip("strace not installed (CI installs it)")
		}
		t.Fatal("strace not installed")
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "nats-server")
	out, err := exec.Command("go", "build", "-o", bin, "github.com/nats-io/nats-server/v2").CombinedOutput()
	require.NoError(t, err, "%s", out)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	port := l.Addr().(*net.TCPAddr).Port
	require.NoError(t, l.Close())
	conf := filepath.Join(dir, "nats.conf")
	require.NoError(t, os.WriteFile(conf, fmt.Appendf(nil,
		"listen: 127.0.0.1:%d\njetstream { store_dir: %q, sync_interval: always }\n", port, filepath.Join(dir, "js")), 0o600))
	s := &straceNATS{url: fmt.Sprintf("nats://127.0.0.1:%d", port), log: filepath.Join(dir, "strace.log")}
	cmd := exec.Command(strace, "-f", "-e", "trace=fsync,fdatasync", "-o", s.log, bin, "-c", conf)
	// A group of its own: killing strace alone detached nats-server, which
	// then outlived the test, still writing into the directory its cleanup
	// was removing ("directory not empty").
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		_ = cmd.Wait()
		// The server, no longer strace's child, is reaped by init.
		for range 200 {
			if syscall.Kill(-cmd.Process.Pid, 0) != nil {
				return
			}
			time.Sleep(50 * time.Millisecond)
		}
	})
	require.Eventually(t, func() bool {
		nc, err := nats.Connect(s.url)
		if err == nil {
			nc.Close()
		}
		return err == nil
	}, 30*time.Second, 100*time.Millisecond)
	return s
}

// Counted, not inferred: on nats-server R1 file storage with
// sync_interval always, each stored message is one fsync; an ack on a
// work-queue stream is one more (its delete); acks on a limits stream
// cost next to none (consumer state is flushed on a timer); an atomic
// batch of n messages a handful, whatever n; a purge one.
func TestFactFsyncsCountedWithStrace(t *testing.T) {
	t.Parallel()
	s := startStraceNATS(t)
	nc, err := nats.Connect(s.url)
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	ctx := context.Background()
	wq := fileStream(t, js, jetstream.StreamConfig{Name: "SW", Retention: jetstream.WorkQueuePolicy})
	lim := fileStream(t, js, jetstream.StreamConfig{Name: "SL"})
	fileStream(t, js, jetstream.StreamConfig{Name: "SB", AllowAtomicPublish: true})
	const n = 300
	phase := func(name string, do func()) int {
		time.Sleep(300 * time.Millisecond) // let stream creation's writes settle
		before := s.fsyncs(t)
		do()
		d := s.fsyncs(t) - before
		t.Logf("%s: %d fsyncs for %d messages", name, d, n)
		return d
	}
	ackAll := func(st jetstream.Stream) {
		c := durable(t, st, jetstream.ConsumerConfig{Durable: "d", AckWait: 30 * time.Second})
		for range n {
			m, _ := next(t, c, 5*time.Second)
			require.NoError(t, m.DoubleAck(ctx))
		}
	}
	publish := phase("publish", func() { publishN(t, js, "SW.x", n) })
	require.GreaterOrEqual(t, publish, n, "one per stored message")
	publishN(t, js, "SL.x", n)
	wqAcks := phase("work-queue acks", func() { ackAll(wq) })
	require.GreaterOrEqual(t, wqAcks, n*9/10, "one per ack: the delete")
	limAcks := phase("limits acks", func() { ackAll(lim) })
	// One by one would be n: consumer state is flushed on a timer, so
	// their number grows with the phase's wall time (89 for 300 acks at
	// load ~25, against a bound of n/5), not with the acks.
	require.Less(t, limAcks, n/2, "acks on a limits stream are not fsynced one by one")
	batch := phase("atomic batch", func() {
		msgs := make([]*nats.Msg, n)
		for i := range msgs {
			msgs[i] = batchRecord("SB", "succeeded", fmt.Sprintf("r%d", i))
		}
		_, err := streams.PublishAtomic(ctx, nc, msgs)
		require.NoError(t, err)
	})
	require.Less(t, batch, 20, "a batch is fsynced once, not per message")
	purge := phase("purge", func() {
		require.NoError(t, lim.Purge(ctx, jetstream.WithPurgeSubject("SL.x"), jetstream.WithPurgeSequence(n)))
	})
	require.LessOrEqual(t, purge, 5, "a purge is one fsync, whatever it removes")
}

// On an R1 file stream the server stages an open atomic batch in a file
// store of its own, a directory under the stream's "batches" folder made
// and removed per batch (server/jetstream_batching.go, newBatchStore); on
// a memory stream, and on R3, it stages in memory. That store is the fixed
// cost of a batch commit on R1 file storage (about 2 ms of server CPU,
// whatever the batch holds), so the fewer records a batch holds, the more
// of it each record carries: why nats-server's CPU per request rises when
// the ledger slows requests down and batches shrink.
func TestFactAtomicBatchStagesInAFileStoreOnR1FileStorage(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		storage jetstream.StorageType
		onDisk  bool
	}{{jetstream.FileStorage, true}, {jetstream.MemoryStorage, false}} {
		t.Run(tc.storage.String(), func(t *testing.T) {
			t.Parallel()
			n := testenv.StartNATS(t)
			js := n.JetStream(t)
			_, err := js.CreateStream(context.Background(), jetstream.StreamConfig{
				Name: "FB", Subjects: []string{"FB.>"}, Storage: tc.storage, AllowAtomicPublish: true,
			})
			require.NoError(t, err)
			batches := filepath.Join(n.Server.JetStreamConfig().StoreDir, "*", "streams", "FB", "batches")
			staged := func(pattern string) []string {
				dirs, _ := filepath.Glob(pattern)
				return dirs
			}
			first := batchRecord("FB", "succeeded", "r1")
			first.Header.Set(streams.HeaderBatchID, "open-batch")
			first.Header.Set(streams.HeaderBatchSeq, "1")
			require.NoError(t, js.Conn().PublishMsg(first))
			require.NoError(t, js.Conn().Flush())
			if tc.onDisk {
				require.Eventually(t, func() bool { return len(staged(filepath.Join(batches, "*"))) == 1 }, 5*time.Second, 10*time.Millisecond,
					"an open batch on R1 file storage has a staging directory of its own")
			}
			last := batchRecord("FB", "succeeded", "r2")
			last.Header.Set(streams.HeaderBatchID, "open-batch")
			last.Header.Set(streams.HeaderBatchSeq, "2")
			last.Header.Set(streams.HeaderBatchCommit, "1")
			resp, err := js.Conn().RequestMsg(last, 5*time.Second)
			require.NoError(t, err)
			require.Contains(t, string(resp.Data), `"count":2`, "the batch committed: %s", resp.Data)
			if !tc.onDisk {
				// The server keeps the batches folder once it has staged a
				// batch on disk; a memory stream never makes it.
				require.Empty(t, staged(batches), "a memory stream stages in memory")
				return
			}
			require.Eventually(t, func() bool { return len(staged(filepath.Join(batches, "*"))) == 0 }, 5*time.Second, 10*time.Millisecond,
				"the staging store is removed once the batch is committed")
		})
	}
}
