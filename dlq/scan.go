package dlq

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// scanBatch is how many messages one pull of a scan asks for.
const scanBatch = 256

// scanOpts selects the messages a scan reads.
type scanOpts struct {
	stream      string
	subjects    []string
	since       time.Time
	headersOnly bool
}

// scan reads the messages of a stream that match o, oldest first, with an
// ephemeral pull consumer (AckNone, in memory, deleted at the end). It reads
// what was there when it started and stops early when fn returns false.
// A missing stream is ErrStreamMissing.
func scan(ctx context.Context, js jetstream.JetStream, o scanOpts, fn func(jetstream.Msg) (bool, error)) error {
	cfg := jetstream.ConsumerConfig{
		AckPolicy:         jetstream.AckNonePolicy,
		HeadersOnly:       o.headersOnly,
		InactiveThreshold: 30 * time.Second,
		MemoryStorage:     true,
		Description:       "personaq quarantine scan",
	}
	switch len(o.subjects) {
	case 0:
	case 1:
		cfg.FilterSubject = o.subjects[0]
	default:
		cfg.FilterSubjects = o.subjects
	}
	if !o.since.IsZero() {
		since := o.since
		cfg.DeliverPolicy, cfg.OptStartTime = jetstream.DeliverByStartTimePolicy, &since
	}
	cons, err := js.CreateConsumer(ctx, o.stream, cfg)
	if err != nil {
		return streamErr(o.stream, err)
	}
	defer func() {
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = js.DeleteConsumer(dctx, o.stream, cons.CachedInfo().Name)
	}()
	pending := cons.CachedInfo().NumPending
	for pending > 0 {
		if err := ctx.Err(); err != nil {
			return err
		}
		batch, err := cons.Fetch(int(min(pending, scanBatch)), jetstream.FetchMaxWait(5*time.Second))
		if err != nil {
			return fmt.Errorf("read stream %s: %w", o.stream, err)
		}
		n := 0
		for m := range batch.Messages() {
			n++
			pending--
			more, err := fn(m)
			if err != nil || !more {
				return err
			}
		}
		if err := batch.Error(); err != nil && !errors.Is(err, jetstream.ErrNoMessages) && !errors.Is(err, context.DeadlineExceeded) {
			return fmt.Errorf("read stream %s: %w", o.stream, err)
		}
		if n == 0 { // messages deleted since the scan started
			return nil
		}
	}
	return nil
}

// streamErr translates a missing stream into ErrStreamMissing, naming it.
func streamErr(stream string, err error) error {
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return fmt.Errorf("%w: stream %s does not exist", ErrStreamMissing, stream)
	}
	return fmt.Errorf("stream %s: %w", stream, err)
}

// msgSeq returns the stream sequence and time of a consumed message.
func msgSeq(m jetstream.Msg) (uint64, time.Time) {
	md, err := m.Metadata()
	if err != nil {
		return 0, time.Time{}
	}
	return md.Sequence.Stream, md.Timestamp
}
