package console

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/personaq/personaq/dlq"
	"github.com/personaq/personaq/schemas"
)

// The quarantine page reads only what it shows: one headers-only pass over
// the records the filter selects (sequence and task header: no payload is
// read or decoded), then the page's records by sequence. dlq.Inspector.List
// decodes every record, which 10,000 records make too slow for a page load.

// scanBatch is how many headers one pull asks for.
const scanBatch = 4096

// selectSeqs returns the sequences of the records f selects (f.Limit is
// ignored), oldest first.
func (s *Server) selectSeqs(ctx context.Context, f dlq.Filter) ([]uint64, error) {
	if err := f.Validate(); err != nil {
		return nil, err
	}
	cfg := jetstream.ConsumerConfig{
		AckPolicy: jetstream.AckNonePolicy, HeadersOnly: true, MemoryStorage: true,
		InactiveThreshold: 30 * time.Second, Description: "personaq console page",
		FilterSubjects: s.subjects(f),
	}
	if !f.Since.IsZero() {
		since := f.Since
		cfg.DeliverPolicy, cfg.OptStartTime = jetstream.DeliverByStartTimePolicy, &since
	}
	cons, err := s.js.CreateConsumer(ctx, s.topo.QuarantineStream, cfg)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return nil, fmt.Errorf("%w: stream %s does not exist", dlq.ErrStreamMissing, s.topo.QuarantineStream)
	}
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", s.topo.QuarantineStream, err)
	}
	defer func() {
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = s.js.DeleteConsumer(dctx, s.topo.QuarantineStream, cons.CachedInfo().Name)
	}()
	return drainSeqs(cons, cons.CachedInfo().NumPending, f.Task)
}

// drainSeqs reads pending messages from cons, keeping those of task.
func drainSeqs(cons jetstream.Consumer, pending uint64, task string) ([]uint64, error) {
	out := make([]uint64, 0, pending)
	for pending > 0 {
		batch, err := cons.Fetch(int(min(pending, scanBatch)), jetstream.FetchMaxWait(5*time.Second))
		if err != nil {
			return nil, fmt.Errorf("read quarantine: %w", err)
		}
		n := 0
		for m := range batch.Messages() {
			n++
			if task != "" && m.Headers().Get(schemas.HeaderTask) != task {
				continue
			}
			if md, err := m.Metadata(); err == nil {
				out = append(out, md.Sequence.Stream)
			}
		}
		if err := batch.Error(); err != nil && !errors.Is(err, jetstream.ErrNoMessages) && !errors.Is(err, context.DeadlineExceeded) {
			return nil, fmt.Errorf("read quarantine: %w", err)
		}
		if n == 0 { // deleted since the pass started
			break
		}
		pending -= min(uint64(n), pending)
	}
	return out, nil
}

// subjects turns the reason and persona filters into subject filters, as
// dlq.Inspector does.
func (s *Server) subjects(f dlq.Filter) []string {
	persona := "*"
	if f.Persona != "" {
		persona = f.Persona
	}
	if len(f.Reasons) == 0 {
		return []string{s.topo.QuarantinePrefix + ".*." + persona}
	}
	out := make([]string, 0, len(f.Reasons))
	for _, r := range f.Reasons {
		if subj := s.topo.QuarantinePrefix + "." + string(r) + "." + persona; !slices.Contains(out, subj) {
			out = append(out, subj)
		}
	}
	return out
}

// pageOf returns page p (1-based, newest first) of seqs (oldest first).
func pageOf(seqs []uint64, p, size int) []uint64 {
	n := len(seqs)
	from, to := n-(p-1)*size, n-p*size
	if from <= 0 {
		return nil
	}
	out := slices.Clone(seqs[max(to, 0):from])
	slices.Reverse(out)
	return out
}

// entries reads the records at seqs; a record removed meanwhile is left out.
func (s *Server) entries(ctx context.Context, seqs []uint64) ([]dlq.Entry, error) {
	out := make([]dlq.Entry, 0, len(seqs))
	for _, seq := range seqs {
		e, err := s.insp.Get(ctx, seq)
		if errors.Is(err, dlq.ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		out = append(out, *e)
	}
	return out, nil
}
