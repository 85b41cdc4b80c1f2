package wire

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/personaq/personaq/schemas"
)

// maxOutcomeScan bounds how many terminal records ForTask reads.
const maxOutcomeScan = 200_000

// TaskRecords are the terminal records of one task's requests, read from
// the outcomes stream (kept for Topology.OutcomesMaxAge) without the
// attempt ledger.
type TaskRecords struct {
	Records []*schemas.OutcomeEvent
	// Scanned is how many records were read; Truncated says the scan
	// stopped at its bound before the end of the stream.
	Scanned   int
	Truncated bool
}

// ForTask reads the terminal records of taskID's requests, oldest first.
// The outcomes stream is keyed by request, not by task, so it reads the
// stream from the start (at most maxOutcomeScan records): a fallback for
// when the attempt ledger knows nothing of the task (expired, wiped, or
// another ledger than the replicas write), not a hot path.
func (s *Outcomes) ForTask(ctx context.Context, taskID string) (*TaskRecords, error) {
	st, err := s.Stream(ctx)
	if err != nil {
		return nil, err
	}
	info, err := st.Info(ctx)
	if err != nil {
		return nil, fmt.Errorf("outcomes stream %s: %w", s.topo.OutcomesStream, err)
	}
	out := &TaskRecords{}
	if info.State.Msgs == 0 {
		return out, nil
	}
	cons, err := st.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{})
	if err != nil {
		return nil, fmt.Errorf("read outcomes stream %s: %w", s.topo.OutcomesStream, err)
	}
	for out.Scanned < maxOutcomeScan {
		batch, err := cons.Fetch(min(512, maxOutcomeScan-out.Scanned), jetstream.FetchMaxWait(time.Second))
		if err != nil {
			return nil, fmt.Errorf("read outcomes stream %s: %w", s.topo.OutcomesStream, err)
		}
		last := uint64(0)
		for m := range batch.Messages() {
			out.Scanned++
			if md, err := m.Metadata(); err == nil {
				last = md.Sequence.Stream
			}
			if ev, err := schemas.DecodeOutcome(m.Data()); err == nil && ev.TaskID == taskID {
				out.Records = append(out.Records, ev)
			}
		}
		if err := batch.Error(); err != nil && !errors.Is(err, jetstream.ErrNoMessages) && !errors.Is(err, context.DeadlineExceeded) {
			return nil, fmt.Errorf("read outcomes stream %s: %w", s.topo.OutcomesStream, err)
		}
		if last == 0 || last >= info.State.LastSeq {
			return out, nil
		}
	}
	out.Truncated = true
	return out, nil
}
