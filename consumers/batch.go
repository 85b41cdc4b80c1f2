package consumers

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/personaq/personaq/consumers/streams"
)

// Terminal records of concurrent completions are committed together, as
// one atomic batch on the outcomes stream: nats-server 2.15 writes a batch
// whole and fsyncs it once, where single publishes are fsynced one by one
// even when concurrent. Each record keeps its create-once expectation; one
// refused expectation rejects the whole batch, which then falls back to
// per-record writes, so one duplicate never fails the others. The ack of a
// request still waits for its own record's confirmation.
//
// Group commit: a record goes out at once when no commit is in flight;
// while one is, records queue and go out together when it returns. The
// wait is one commit, not a timer: on R1 file storage the server builds a
// file-backed staging store for every atomic batch (directory, metadata
// written and fsynced, removed after), a fixed cost of several
// milliseconds whatever the batch holds, so a batch must be large to be
// worth it, and only what queued behind a commit makes it large. The
// runtime frees a request's worker slot when its handler returns
// (transport.Delivery.WorkDone), so completions keep arriving while a
// commit is in flight. Quarantine records do not join: they are on
// another stream and dedup by Nats-Msg-Id, which a batch refuses
// (JSAtomicPublishContainsDuplicateMessage).

const (
	// batchMax caps one batch (the server's limit is 1000).
	batchMax = 256
	// batchMinSize: fewer records are written one by one, concurrently.
	// A batch's staging store costs more than a few single writes.
	batchMinSize = 4
	// batchCommitTimeout bounds one commit; past it every record of the
	// batch is written alone (a record the batch did store is then found
	// by its create-once check and recognised as ours).
	batchCommitTimeout = 5 * time.Second
)

// batchMinVersion is the first nats-server version that fsyncs an atomic
// batch once (2.12 to 2.14 fsync each of its messages: slower than single
// writes).
var batchMinVersion = [2]int{2, 15}

// RecordBatchObserver is an Observer that also sees the terminal records
// group commits: called once per atomic batch the runtime commits, with
// the records it held, how long the commit took and, when the server
// refused it, why (its records were then written one by one). Records of
// a commit too small for a batch (fewer than 4) are written one by one
// and not reported. Records per batch is records per fsync: what the
// group commit saves, and what the server's fixed cost per batch is
// shared by.
type RecordBatchObserver interface {
	Observer
	RecordBatch(records int, took time.Duration, err error)
}

// pendingRecord is one terminal record waiting for its batch.
type pendingRecord struct {
	msg *nats.Msg
	// request is the create-once subject the record checks: one per batch
	// (the server checks a subject's expectation once per batch).
	request string
	done    chan error
}

// recordBatcher collects records and commits them; safe for concurrent use.
//
// Its commits are not loops and do not run on a loop.Group: each is one
// goroutine per batch, started on demand (by a write that finds no commit
// in flight, or by the commit that returns) and ending with its batch;
// one runs at a time.
// A Group starts a fixed set of loops once and its Stop cancels them,
// where stop must cancel nothing: it writes what is queued (a commit that
// returns during stop starts the next batch) and waits for every commit.
// A WaitGroup counting commits, with stopped sending later writes alone,
// is that lifecycle.
type recordBatcher struct {
	js  jetstream.JetStream
	log zerolog.Logger
	obs RecordBatchObserver // nil: none

	mu       sync.Mutex
	queue    []*pendingRecord
	inflight bool           // a commit is in flight
	stopped  bool           // set by stop: a write no longer joins a batch
	wg       sync.WaitGroup // one per commit started
}

func newRecordBatcher(js jetstream.JetStream, log zerolog.Logger, obs Observer) *recordBatcher {
	b := &recordBatcher{js: js, log: log}
	b.obs, _ = obs.(RecordBatchObserver)
	return b
}

// write stores msg (whose headers carry its create-once expectation on
// request) in a batch, or alone, and returns when it is confirmed.
func (b *recordBatcher) write(ctx context.Context, msg *nats.Msg, request string) error {
	p := &pendingRecord{msg: msg, request: request, done: make(chan error, 1)}
	b.mu.Lock()
	if b.stopped {
		b.mu.Unlock()
		return writeAlone(ctx, b.js, msg)
	}
	b.queue = append(b.queue, p)
	if !b.inflight {
		b.flushLocked()
	}
	b.mu.Unlock()
	select {
	case err := <-p.done:
		return err
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

// flushLocked starts a commit of up to batchMax queued records; the
// commit, when it returns, starts the next one with what queued meanwhile.
func (b *recordBatcher) flushLocked() {
	n := min(len(b.queue), batchMax)
	batch := b.queue[:n:n]
	b.queue = b.queue[n:]
	b.inflight = true
	b.wg.Add(1)
	go func() { // one commit, not a loop: see recordBatcher
		defer b.wg.Done()
		b.commit(batch)
		b.mu.Lock()
		defer b.mu.Unlock()
		b.inflight = false
		if len(b.queue) > 0 {
			b.flushLocked()
		}
	}()
}

// commit writes batch: as one atomic batch when large enough, else (or
// when the batch is refused) record by record.
func (b *recordBatcher) commit(batch []*pendingRecord) {
	together, alone := splitBatch(batch)
	if len(together) < batchMinSize {
		alone = append(alone, together...)
		together = nil
	}
	if len(together) > 0 {
		msgs := make([]*nats.Msg, len(together))
		for i, p := range together {
			msgs[i] = p.msg
		}
		ctx, cancel := context.WithTimeout(context.Background(), batchCommitTimeout)
		start := time.Now()
		_, err := streams.PublishAtomic(ctx, b.js.Conn(), msgs)
		cancel()
		if b.obs != nil {
			b.obs.RecordBatch(len(msgs), time.Since(start), err)
		}
		if err == nil {
			for _, p := range together {
				p.done <- nil
			}
		} else {
			b.log.Debug().Err(err).Int("records", len(together)).Msg("terminal record batch refused; writing its records one by one")
			alone = append(alone, together...)
		}
	}
	var wg sync.WaitGroup
	for _, p := range alone {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), settleTimeout)
			defer cancel()
			p.done <- writeAlone(ctx, b.js, p.msg)
		})
	}
	wg.Wait()
}

// splitBatch keeps the first record of each request in together and puts
// any further one in alone: within one batch the server checks a
// subject's expectation once, so two records of a request would both pass.
func splitBatch(batch []*pendingRecord) (together, alone []*pendingRecord) {
	seen := make(map[string]bool, len(batch))
	for _, p := range batch {
		if seen[p.request] {
			alone = append(alone, p)
			continue
		}
		seen[p.request] = true
		together = append(together, p)
	}
	return together, alone
}

// writeAlone publishes msg by itself (its expectation headers kept, any
// batch headers of a refused batch removed), repeated while a cluster
// elects a leader.
func writeAlone(ctx context.Context, js jetstream.JetStream, msg *nats.Msg) error {
	for _, h := range []string{streams.HeaderBatchID, streams.HeaderBatchSeq, streams.HeaderBatchCommit} {
		msg.Header.Del(h)
	}
	_, err := js.PublishMsg(ctx, msg, leaderWait...)
	return err
}

// stop writes what is queued and waits for every commit.
func (b *recordBatcher) stop() {
	b.mu.Lock()
	b.stopped = true
	if len(b.queue) > 0 {
		b.flushLocked()
	}
	b.mu.Unlock()
	b.wg.Wait()
}

// batchSupport says whether terminal records can be batched on this
// server and stream, and if not why.
func batchSupport(serverVersion string, allowAtomic bool) (bool, string) {
	if !versionAtLeast(serverVersion, batchMinVersion) {
		return false, "nats-server " + serverVersion + " does not fsync an atomic batch once (2.15 or later does)"
	}
	if !allowAtomic {
		return false, "the outcomes stream does not allow atomic publish (the server ignored allow_atomic)"
	}
	return true, ""
}

// versionAtLeast compares a "major.minor.patch[-pre]" version with want.
func versionAtLeast(v string, want [2]int) bool {
	parts := strings.SplitN(strings.TrimPrefix(v, "v"), ".", 3)
	if len(parts) < 2 {
		return false
	}
	major, err1 := strconv.Atoi(parts[0])
	minor, err2 := strconv.Atoi(parts[1])
	if err1 != nil || err2 != nil {
		return false
	}
	return major > want[0] || (major == want[0] && minor >= want[1])
}

// useBatches turns batching of terminal records on when the server and
// the outcomes stream support it, and says once, either way, what it chose.
func (s *Outcomes) useBatches(ctx context.Context, log *zerolog.Logger, obs Observer) {
	allow := false
	if st, err := s.outcomes(ctx); err == nil {
		allow = st.CachedInfo().Config.AllowAtomicPublish
	}
	ok, why := batchSupport(s.js.Conn().ConnectedServerVersion(), allow)
	if !ok {
		log.Info().Str("why", why).Msg("terminal records written one by one, one fsync each")
		return
	}
	s.mu.Lock()
	s.batch = newRecordBatcher(s.js, log.With().Str("component", "record-batch").Logger(), obs)
	s.mu.Unlock()
	log.Info().Int("max", batchMax).Msg("terminal records of concurrent completions committed as atomic batches")
}

// stopBatches writes the records still queued and stops batching.
func (s *Outcomes) stopBatches() {
	s.mu.Lock()
	b := s.batch
	s.batch = nil
	s.mu.Unlock()
	if b != nil {
		b.stop()
	}
}

func (s *Outcomes) batcher() *recordBatcher {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.batch
}
