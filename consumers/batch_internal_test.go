package consumers

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"

	"github.com/personaq/personaq/consumers/streams"
	"github.com/personaq/personaq/integration/testenv"
	"github.com/personaq/personaq/schemas"
)

func TestSplitBatchKeepsOneRecordPerRequest(t *testing.T) {
	t.Parallel()
	rec := func(req string) *pendingRecord { return &pendingRecord{request: req} }
	a1, b, a2, c, a3 := rec("a"), rec("b"), rec("a"), rec("c"), rec("a")
	together, alone := splitBatch([]*pendingRecord{a1, b, a2, c, a3})
	require.Equal(t, []*pendingRecord{a1, b, c}, together)
	require.Equal(t, []*pendingRecord{a2, a3}, alone)
}

func TestBatchSupport(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		version string
		allow   bool
		want    bool
	}{
		{"2.15.2", true, true},
		{"2.16.0-RC.1", true, true},
		{"3.0.0", true, true},
		{"2.14.5", true, false}, // fsyncs a batch per message
		{"2.11.9", true, false},
		{"2.15.2", false, false}, // the server ignored allow_atomic
		{"", true, false},
		{"junk", true, false},
	} {
		t.Run(fmt.Sprintf("%s/%v", tc.version, tc.allow), func(t *testing.T) {
			ok, why := batchSupport(tc.version, tc.allow)
			require.Equal(t, tc.want, ok)
			require.Equal(t, tc.want, why == "", "a reason exactly when refused: %q", why)
		})
	}
}

// outcomesEnv provisions the default topology on an in-process server and
// returns its Outcomes.
func outcomesEnv(t *testing.T) (jetstream.JetStream, Topology, *Outcomes) {
	t.Helper()
	js := testenv.StartNATS(t).JetStream(t)
	topo := Topology{}.WithDefaults()
	require.NoError(t, Provision(context.Background(), js, topo, nil))
	return js, topo, NewOutcomes(js, topo)
}

func testRecord(req string, outcome schemas.Outcome) *schemas.OutcomeEvent {
	return &schemas.OutcomeEvent{
		SchemaVersion: schemas.Version, Outcome: outcome, Persona: "p", RequestID: req,
		TaskID: "t", Step: "s", Attempts: 1, At: time.Now().UTC(), Reason: schemas.ReasonTerminal,
	}
}

// Concurrent terminal records are committed in atomic batches, each keeping
// its create-once check: a record of a request already ended is refused
// (and the standing one returned) without failing the others of its
// batch, and two records of one request racing end as one.
func TestBatchedRecordsKeepCreateOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	js, topo, o := outcomesEnv(t)
	log := zerolog.New(zerolog.NewTestWriter(t))
	o.useBatches(ctx, &log, nopObserver{})
	require.NotNil(t, o.batcher(), "an in-process 2.15 server batches")
	defer o.stopBatches()

	first := testRecord("ended", schemas.OutcomeSucceeded)
	_, won, err := o.create(ctx, first)
	require.NoError(t, err)
	require.True(t, won)

	const n = 200
	var wg sync.WaitGroup
	var racedWins atomic.Int32
	errs := make(chan error, n+8)
	for i := range n {
		wg.Go(func() {
			ev := testRecord(fmt.Sprintf("r%d", i), schemas.OutcomeSucceeded)
			final, won, err := o.create(ctx, ev)
			if err == nil && (!won || final != ev) {
				err = fmt.Errorf("r%d: not stored as written", i)
			}
			errs <- err
		})
	}
	for range 4 {
		wg.Go(func() {
			final, won, err := o.create(ctx, testRecord("ended", schemas.OutcomeCancelled))
			if err == nil && (won || final.Outcome != schemas.OutcomeSucceeded) {
				err = fmt.Errorf("a second record of an ended request: won %v, %s", won, final.Outcome)
			}
			errs <- err
		})
	}
	for range 4 {
		wg.Go(func() {
			_, won, err := o.create(ctx, testRecord("raced", schemas.OutcomeCancelled))
			if won {
				racedWins.Add(1)
			}
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	require.EqualValues(t, 1, racedWins.Load(), "one record of the raced request")
	s, err := js.Stream(ctx, topo.OutcomesStream)
	require.NoError(t, err)
	info, err := s.Info(ctx)
	require.NoError(t, err)
	require.EqualValues(t, n+2, info.State.Msgs, "one record per request")
	batched := 0
	for seq := uint64(1); seq <= info.State.LastSeq; seq++ {
		raw, err := s.GetMsg(ctx, seq)
		require.NoError(t, err)
		if raw.Header.Get(streams.HeaderBatchID) != "" {
			batched++
		}
	}
	// How many joined a batch depends on scheduling; the commit itself is
	// pinned by TestBatchCommitFallsBackRecordByRecord.
	t.Logf("%d of %d records committed in a batch", batched, n+2)
}

// A batch is committed whole; one holding a record of a request already
// ended is refused and its records are written one by one: the ended
// request's and a second record of one request are refused, every other
// record is stored.
func TestBatchCommitFallsBackRecordByRecord(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	js, topo, o := outcomesEnv(t)
	obs := &batchObserver{}
	b := newRecordBatcher(js, zerolog.New(zerolog.NewTestWriter(t)), obs)
	pending := func(req string) *pendingRecord {
		msg, filter, err := o.recordMsg(testRecord(req, schemas.OutcomeSucceeded))
		require.NoError(t, err)
		return &pendingRecord{msg: msg, request: filter, done: make(chan error, 1)}
	}
	s, err := js.Stream(ctx, topo.OutcomesStream)
	require.NoError(t, err)
	inBatch := func(req string) bool {
		raw, err := s.GetLastMsgForSubject(ctx, topo.OutcomeFilter(req))
		require.NoError(t, err)
		return raw.Header.Get(streams.HeaderBatchID) != ""
	}

	var clean []*pendingRecord
	for i := range 6 {
		clean = append(clean, pending(fmt.Sprintf("c%d", i)))
	}
	b.commit(clean)
	for i, p := range clean {
		require.NoError(t, <-p.done)
		require.True(t, inBatch(fmt.Sprintf("c%d", i)), "committed as one batch")
	}

	mixed := []*pendingRecord{pending("m0"), pending("c3"), pending("m1"), pending("m2"), pending("m2"), pending("m3")}
	b.commit(mixed)
	errs := make([]error, len(mixed))
	for i, p := range mixed {
		errs[i] = <-p.done
	}
	for _, i := range []int{0, 2, 5} {
		require.NoError(t, errs[i], "record %d", i)
	}
	require.True(t, isWrongLastSequence(errs[1]), "the ended request's: %v", errs[1])
	// The two records of m2 race once written alone: one is stored.
	require.True(t, (errs[3] == nil) != (errs[4] == nil), "one record of m2: %v, %v", errs[3], errs[4])
	require.True(t, isWrongLastSequence(errors.Join(errs[3], errs[4])))
	require.False(t, inBatch("m0"), "the refused batch's records were written alone")
	require.Equal(t, []int{6, 5}, obs.records, "the observer sees each batch: the clean one and the refused one without m2's second record")
	require.NoError(t, obs.errs[0])
	require.Error(t, obs.errs[1], "the refused batch is reported refused")
	info, err := s.Info(ctx)
	require.NoError(t, err)
	require.EqualValues(t, 6+4, info.State.Msgs)
}

// batchObserver records what RecordBatch is told.
type batchObserver struct {
	nopObserver
	mu      sync.Mutex
	records []int
	errs    []error
}

func (o *batchObserver) RecordBatch(records int, took time.Duration, err error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if took <= 0 {
		panic("a commit took no time")
	}
	o.records, o.errs = append(o.records, records), append(o.errs, err)
}

// A server or stream without atomic publish: records are written one by
// one, and the choice is logged once.
func TestNoBatchesWithoutAllowAtomic(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	js, topo, _ := outcomesEnv(t)
	s, err := js.Stream(ctx, topo.OutcomesStream)
	require.NoError(t, err)
	cfg := s.CachedInfo().Config
	cfg.AllowAtomicPublish = false
	_, err = js.UpdateStream(ctx, cfg)
	require.NoError(t, err)
	o := NewOutcomes(js, topo) // a fresh one: the stream config is read once
	var buf lockedBuffer
	log := zerolog.New(&buf)
	o.useBatches(ctx, &log, nopObserver{})
	require.Nil(t, o.batcher())
	require.Contains(t, buf.String(), "terminal records written one by one")
	_, won, err := o.create(ctx, testRecord("r", schemas.OutcomeSucceeded))
	require.NoError(t, err)
	require.True(t, won)
}

// lockedBuffer is a bytes.Buffer safe for a logger's concurrent writes.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// stop writes every record still queued, more than one batch of them, and
// returns only once each is confirmed; a write after stop goes out alone.
func TestBatcherStopWritesWhatIsQueued(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	js, topo, o := outcomesEnv(t)
	b := newRecordBatcher(js, zerolog.New(zerolog.NewTestWriter(t)), nopObserver{})
	const n = batchMax + 44 // stop's own flush takes batchMax; the rest follows it
	queued := make([]*pendingRecord, n)
	for i := range queued {
		msg, filter, err := o.recordMsg(testRecord(fmt.Sprintf("q%d", i), schemas.OutcomeSucceeded))
		require.NoError(t, err)
		queued[i] = &pendingRecord{msg: msg, request: filter, done: make(chan error, 1)}
	}
	b.mu.Lock()
	b.queue = append(b.queue, queued...) // as writes that found commits in flight leave them
	b.mu.Unlock()

	b.stop()
	for i, p := range queued {
		select {
		case err := <-p.done:
			require.NoError(t, err, "record %d", i)
		default:
			t.Fatalf("record %d not confirmed when stop returned", i)
		}
	}

	late, filter, err := o.recordMsg(testRecord("late", schemas.OutcomeSucceeded))
	require.NoError(t, err)
	require.NoError(t, b.write(ctx, late, filter))
	s, err := js.Stream(ctx, topo.OutcomesStream)
	require.NoError(t, err)
	info, err := s.Info(ctx)
	require.NoError(t, err)
	require.EqualValues(t, n+1, info.State.Msgs)
	raw, err := s.GetLastMsgForSubject(ctx, topo.OutcomeFilter("late"))
	require.NoError(t, err)
	require.Empty(t, raw.Header.Get(streams.HeaderBatchID), "written alone after stop")
}

// Group commit: while a commit is in flight, records queue (none is sent
// on a timer); when it returns, everything queued goes out as one atomic
// batch. With no commit in flight a record goes out at once.
func TestRecordsQueueBehindTheCommitInFlight(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	js, topo, o := outcomesEnv(t)
	b := newRecordBatcher(js, zerolog.New(zerolog.NewTestWriter(t)), nopObserver{})
	t.Cleanup(b.stop)

	alone, filter, err := o.recordMsg(testRecord("first", schemas.OutcomeSucceeded))
	require.NoError(t, err)
	require.NoError(t, b.write(ctx, alone, filter), "no commit in flight: written at once")
	b.wg.Wait() // its commit has returned (it confirms its record first)

	b.mu.Lock()
	b.inflight = true // as while a commit is on its way
	b.mu.Unlock()
	const n = 12
	errs := make(chan error, n)
	for i := range n {
		msg, filter, err := o.recordMsg(testRecord(fmt.Sprintf("g%d", i), schemas.OutcomeSucceeded))
		require.NoError(t, err)
		go func() { errs <- b.write(ctx, msg, filter) }()
	}
	require.Eventually(t, func() bool {
		b.mu.Lock()
		defer b.mu.Unlock()
		return len(b.queue) == n
	}, 5*time.Second, time.Millisecond, "every record queues behind the commit in flight")
	require.Never(t, func() bool { return len(errs) > 0 }, 100*time.Millisecond, 10*time.Millisecond, "nothing confirmed while queued")

	b.mu.Lock() // the commit in flight returns: the queue goes out
	b.inflight = false
	b.flushLocked()
	b.mu.Unlock()
	for range n {
		require.NoError(t, <-errs)
	}
	s, err := js.Stream(ctx, topo.OutcomesStream)
	require.NoError(t, err)
	batches := map[string]int{}
	for i := range n {
		raw, err := s.GetLastMsgForSubject(ctx, topo.OutcomeFilter(fmt.Sprintf("g%d", i)))
		require.NoError(t, err)
		batches[raw.Header.Get(streams.HeaderBatchID)]++
	}
	require.Len(t, batches, 1, "one atomic batch for everything queued")
	require.NotContains(t, batches, "", "committed as a batch, not one by one")
}
