package advisory

import (
	"context"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/personaq/personaq/consumers/loop"
	"github.com/personaq/personaq/dlq"
)

// SweepResult is what one max-deliveries sweep found and did.
type SweepResult struct {
	// Captured lists the stuck messages moved to the quarantine.
	Captured []Captured
	// Skipped names the consumers not swept this time, and why.
	Skipped []string
	// Failed lists the messages whose capture failed; the sweep went on
	// past each (they stay in their stream for the next try).
	Failed []dlq.CaptureFailure
}

// Sweep finds the messages of the requests stream that reached their
// consumer's MaxDeliver without the advisory being handled (a listener
// that was down when no advisory stream existed yet, an advisory lost) and
// captures them as Capture does.
//
// How it tells them apart: in a work-queue stream an acked or termed
// message is deleted, so a message still stored at or below the sequence a
// consumer has delivered up to, while that consumer has nothing awaiting an
// ack, can only be one the server gave up on. A consumer with messages
// awaiting an ack is skipped (its stuck messages cannot be told from the
// in-flight ones) and named in Skipped; a later sweep, or the advisory,
// gets it. Candidates are re-read after SweepGrace so that a message acked
// just before is gone by then.
//
// A capture that fails does not stop the sweep: it is reported (error log,
// the count `quarantine stats` shows, SweepResult.Failed) and the sweep
// goes on with the next message; the error returned then wraps
// ErrCaptureFailed and names every one.
func (l *Listener) Sweep(ctx context.Context) (SweepResult, error) {
	var res SweepResult
	s, err := l.js.Stream(ctx, l.cfg.RequestsStream)
	if err != nil {
		return res, streamErr(l.cfg.RequestsStream, err)
	}
	var found []Advisory
	lister := s.ListConsumers(ctx)
	for info := range lister.Info() {
		advs, skip, err := l.stuck(ctx, s, info)
		if err != nil {
			skip = fmt.Sprintf("%s: %v", info.Name, err)
		}
		if skip != "" {
			res.Skipped = append(res.Skipped, skip)
		}
		found = append(found, advs...)
	}
	if err := lister.Err(); err != nil && !errors.Is(err, jetstream.ErrEndOfData) {
		return res, fmt.Errorf("list consumers of %s: %w", l.cfg.RequestsStream, err)
	}
	if len(found) == 0 {
		return res, nil
	}
	if !loop.Sleep(ctx, l.cfg.SweepGrace) {
		return res, ctx.Err()
	}
	var errs []error
	for _, adv := range found {
		c, err := l.capture(ctx, adv, true)
		switch {
		case ctx.Err() != nil:
			return res, ctx.Err()
		case err != nil:
			l.failed(ctx, adv, err, 0)
			res.Failed = append(res.Failed, dlq.CaptureFailure{Stream: adv.Stream, Seq: adv.StreamSeq, Error: err.Error(), At: l.cfg.Now().UTC()})
			errs = append(errs, fmt.Errorf("%s seq %d: %w", adv.Stream, adv.StreamSeq, err))
		case !c.Gone:
			res.Captured = append(res.Captured, c)
		}
	}
	if len(errs) > 0 {
		return res, fmt.Errorf("%w: %d of %d: %w", ErrCaptureFailed, len(errs), len(found), errors.Join(errs...))
	}
	return res, nil
}

// stuck lists the given-up messages of one consumer.
func (l *Listener) stuck(ctx context.Context, s jetstream.Stream, info *jetstream.ConsumerInfo) ([]Advisory, string, error) {
	cfg := info.Config
	if cfg.MaxDeliver <= 0 || info.Delivered.Stream == 0 {
		return nil, "", nil
	}
	if info.NumAckPending > 0 {
		return nil, fmt.Sprintf("%s: %d messages awaiting an ack", info.Name, info.NumAckPending), nil
	}
	filters := cfg.FilterSubjects
	if cfg.FilterSubject != "" {
		filters = []string{cfg.FilterSubject}
	}
	if len(filters) == 0 {
		filters = []string{">"}
	}
	// On a limits-retention stream acked messages stay until trimmed, so
	// only what lies above the ack floor can be a given-up message the
	// sweep may take (those below wait for their advisory, which the
	// trimmer keeps them for); a work queue holds no acked message.
	from := uint64(1)
	if s.CachedInfo().Config.Retention == jetstream.LimitsPolicy {
		from = info.AckFloor.Stream + 1
	}
	var out []Advisory
	for _, f := range filters {
		for seq := from; seq <= info.Delivered.Stream; {
			m, err := s.GetMsg(ctx, seq, jetstream.WithGetMsgSubject(f))
			if errors.Is(err, jetstream.ErrMsgNotFound) {
				break
			}
			if err != nil {
				return nil, "", fmt.Errorf("scan %s for %s: %w", l.cfg.RequestsStream, info.Name, err)
			}
			if m.Sequence > info.Delivered.Stream {
				break
			}
			out = append(out, Advisory{Stream: l.cfg.RequestsStream, Consumer: info.Name, StreamSeq: m.Sequence,
				Deliveries: uint64(cfg.MaxDeliver), Time: l.cfg.Now()})
			seq = m.Sequence + 1
		}
	}
	return out, "", nil
}

func (l *Listener) sweepLoop(ctx context.Context) {
	for {
		res, err := l.Sweep(ctx)
		switch {
		case ctx.Err() != nil:
			return
		case err != nil:
			l.log.Error().Err(err).Int("captured", len(res.Captured)).Int("failed", len(res.Failed)).
				Strs("skipped", res.Skipped).Msg("max-deliveries sweep did not capture everything")
		case len(res.Captured) > 0 || len(res.Skipped) > 0:
			l.log.Info().Int("captured", len(res.Captured)).Strs("skipped", res.Skipped).Msg("max-deliveries sweep")
		}
		if l.cfg.SweepInterval < 0 || !loop.Sleep(ctx, l.cfg.SweepInterval) {
			return
		}
	}
}
