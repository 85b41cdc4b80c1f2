package dlq

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/personaq/personaq/handlers"
	"github.com/personaq/personaq/retry"
	"github.com/personaq/personaq/schemas"
)

// errInterrupted marks a compensation cut short by the sweep's context: the
// saga stays RUNNING, nothing is claimed.
var errInterrupted = errors.New("sweep interrupted")

// intakeSettle is how long intake waits for messages once a no-wait pull
// found none.
const intakeSettle = 200 * time.Millisecond

// intake turns every pending compensation message into saga state, then
// acks it. Invalid messages are quarantined as invalid_message.
func (s *Sweeper) intake(ctx context.Context, kv jetstream.KeyValue, rep *Report) error {
	cons, err := s.js.Consumer(ctx, s.topo.Stream, s.topo.Durable)
	if err != nil {
		return fmt.Errorf("compensation consumer %s: %w", s.topo.Durable, err)
	}
	for wait := false; ctx.Err() == nil; {
		var batch jetstream.MessageBatch
		if wait {
			// A no-wait pull can come back empty for a message the stream
			// stored a moment ago (the consumer learns of it, and counts it
			// pending, asynchronously): before giving up, wait briefly.
			batch, err = cons.Fetch(64, jetstream.FetchMaxWait(intakeSettle))
		} else {
			batch, err = cons.FetchNoWait(64)
		}
		if err != nil {
			return fmt.Errorf("fetch compensations: %w", err)
		}
		n := 0
		for m := range batch.Messages() {
			n++
			s.accept(ctx, kv, m, rep)
		}
		if n == 0 && wait {
			return nil
		}
		wait = n == 0
	}
	return ctx.Err()
}

func (s *Sweeper) accept(ctx context.Context, kv jetstream.KeyValue, m jetstream.Msg, rep *Report) {
	seq, _ := msgSeq(m)
	req, err := schemas.DecodeCompensation(m.Data())
	if err != nil {
		s.rejectMsg(ctx, m, seq, "compensation request could not be decoded: "+err.Error(), rep)
		return
	}
	now := s.now()
	sg := newSaga(req, m.Data(), m.Headers(), s.topo.Stream, seq, now)
	_, err = kv.Create(ctx, SagaKey(req.SagaID), sg.encode())
	if errors.Is(err, jetstream.ErrKeyExists) {
		err = s.merge(ctx, kv, sg, m, seq, rep)
	}
	if errors.Is(err, errHandled) {
		return
	}
	if err != nil {
		rep.Errors = append(rep.Errors, fmt.Sprintf("saga %s: %s %s: compensation request not taken in (retried next sweep): %v", req.SagaID, req.Kind, req.Target, err))
		_ = m.NakWithDelay(5 * time.Second)
		return
	}
	if err := m.DoubleAck(ctx); err != nil {
		s.log.Warn().Err(err).Str("saga_id", req.SagaID).Msg("compensation request ack failed; it will be redelivered (intake is idempotent)")
	}
}

// merge handles a request for a saga that is already recorded.
func (s *Sweeper) merge(ctx context.Context, kv jetstream.KeyValue, in *Saga, m jetstream.Msg, seq uint64, rep *Report) error {
	cur, err := getSaga(ctx, kv, in.ID)
	if err != nil {
		return err
	}
	replay := m.Headers().Get(HeaderReplayOf)
	switch {
	case cur.State == SagaRunning && (cur.Kind != in.Kind || cur.Target != in.Target):
		s.rejectMsg(ctx, m, seq, fmt.Sprintf("saga %s already has a pending compensation %s %s; a saga carries one compensation, so %s %s was not taken in",
			in.ID, cur.Kind, cur.Target, in.Kind, in.Target), rep)
		return errHandled
	case cur.State == SagaQuarantined && replay != "":
		in.Reopened, in.CreatedAt = cur.Reopened+1, cur.CreatedAt
		if _, err := kv.Update(ctx, SagaKey(in.ID), in.encode(), cur.Revision); err != nil {
			return fmt.Errorf("reopen saga: %w", err)
		}
		s.log.Info().Str("saga_id", in.ID).Str("replay_of", replay).Msg("quarantined saga reopened by an operator's replay")
	case cur.State.Terminal():
		s.log.Info().Str("saga_id", in.ID).Str("state", string(cur.State)).Msg("compensation request for a terminal saga ignored")
	}
	return nil
}

// errHandled: the message was settled already (rejected).
var errHandled = errors.New("handled")

// rejectMsg quarantines an invalid compensation message as invalid_message
// (payload intact) and terms it; if the record cannot be written the
// message is redelivered.
func (s *Sweeper) rejectMsg(ctx context.Context, m jetstream.Msg, seq uint64, detail string, rep *Report) {
	now := s.now().UTC()
	rec := &schemas.QuarantineRecord{
		SchemaVersion: schemas.Version, ID: RecordID(s.topo.Stream, seq), Reason: schemas.ReasonInvalidMessage,
		Detail: detail, OriginalSubject: m.Subject(), Headers: map[string][]string(m.Headers()), Payload: m.Data(),
		Stream: s.topo.Stream, Sequence: seq, SagaID: m.Headers().Get(HeaderSaga), QuarantinedAt: now,
		Errors: []schemas.AttemptRecord{{Class: retry.ClassInvalidMessage.String(), Error: detail, At: now}},
	}
	if rec.Payload == nil {
		rec.Payload = []byte{}
	}
	qseq, _, err := s.w.Put(ctx, rec)
	if err != nil {
		rep.Errors = append(rep.Errors, fmt.Sprintf("compensation message %s seq %d: invalid and not quarantined yet (retried next sweep): %v", s.topo.Stream, seq, err))
		_ = m.NakWithDelay(5 * time.Second)
		return
	}
	rep.Errors = append(rep.Errors, fmt.Sprintf("compensation message %s seq %d: quarantined as invalid_message (quarantine seq %d): %s", s.topo.Stream, seq, qseq, detail))
	_ = m.Term()
}

// compensate runs a RUNNING saga's compensation and records its end.
func (s *Sweeper) compensate(ctx context.Context, kv jetstream.KeyValue, sg *Saga, rep *Report) {
	var (
		attempts int
		hist     []schemas.AttemptRecord
		err      error
	)
	h := s.cfg.Handlers[sg.Kind]
	if h == nil || sg.Request == nil {
		err = fmt.Errorf("%w for kind %s", ErrNoHandler, sg.Kind)
	} else {
		attempts, hist, err = s.run(ctx, h, sg)
	}
	if errors.Is(err, errInterrupted) {
		s.log.Info().Str("saga_id", sg.ID).Msg("compensation interrupted; saga left RUNNING for the next sweep")
		return
	}
	next := *sg
	next.Attempts, next.Errors, next.UpdatedAt = attempts, hist, s.now().UTC()
	if err == nil {
		next.State, next.TerminalReason = SagaCompensated, ""
		if s.transition(ctx, kv, sg, &next) {
			rep.Recovered = append(rep.Recovered, sg.ID)
			s.log.Info().Str("saga_id", sg.ID).Str("kind", string(sg.Kind)).Str("target", sg.Target).Int("attempts", attempts).Msg("saga compensated")
		}
		return
	}
	next.State, next.TerminalReason, next.QuarantineSeq = SagaQuarantined, terminalReason(sg, err, attempts), 0
	if !s.transition(ctx, kv, sg, &next) {
		return
	}
	entry := fmt.Sprintf("saga %s: %s", sg.ID, next.TerminalReason)
	if werr := s.writeRecord(ctx, kv, &next); werr != nil {
		entry += fmt.Sprintf(" (quarantine record not written yet, retried next sweep: %v)", werr)
	}
	rep.Errors = append(rep.Errors, entry)
	s.log.Warn().Str("saga_id", sg.ID).Str("kind", string(sg.Kind)).Str("target", sg.Target).Int("attempts", attempts).
		Str("terminal_reason", next.TerminalReason).Msg("saga quarantined: compensation failed")
}

// transition writes next over cur if nobody changed it meanwhile.
func (s *Sweeper) transition(ctx context.Context, kv jetstream.KeyValue, cur, next *Saga) bool {
	rev, err := kv.Update(ctx, SagaKey(cur.ID), next.encode(), cur.Revision)
	if err != nil {
		s.log.Warn().Err(err).Str("saga_id", cur.ID).Msg("saga changed by someone else during its compensation; their outcome stands")
		return false
	}
	next.Revision = rev
	return true
}

func terminalReason(sg *Saga, err error, attempts int) string {
	if errors.Is(err, ErrNoHandler) {
		return fmt.Sprintf("no compensation handler registered for %s %s: parked for a person", sg.Kind, sg.Target)
	}
	r := fmt.Sprintf("%s failed for %s %s: %v", kindPhrase(sg.Kind), sg.Kind, sg.Target, err)
	if attempts > 1 {
		r += fmt.Sprintf(" (after %d attempts)", attempts)
	}
	return r
}

// run invokes h under the kind's policy: each attempt bounded by its
// timeout, retries after the policy's delays, stopping at a terminal or
// non-retryable error or when attempts are spent.
func (s *Sweeper) run(ctx context.Context, h CompensationFunc, sg *Saga) (int, []schemas.AttemptRecord, error) {
	pol := s.cfg.Policy
	if p, ok := s.cfg.Policies[sg.Kind]; ok {
		pol = p
	}
	pol = pol.WithDefaults()
	var history []retry.Attempt
	var hist []schemas.AttemptRecord
	for n := 1; ; n++ {
		start := s.now()
		actx, cancel := context.WithTimeout(ctx, pol.AttemptTimeout)
		err := call(actx, h, sg.Request)
		cancel()
		if err == nil {
			return n, hist, nil
		}
		if ctx.Err() != nil {
			return n, hist, fmt.Errorf("%w: %w", errInterrupted, ctx.Err())
		}
		c := handlers.Classify(err)
		a := retry.Attempt{Number: n, Class: c.Class, ErrorTypes: c.TypeNames, Error: err.Error(),
			RetryAfter: c.RetryAfter, Feedback: c.Feedback, Duration: s.now().Sub(start), At: start}
		ar := schemas.AttemptRecord{Attempt: n, Class: c.Class.String(), Error: a.Error, DurationMs: a.Duration.Milliseconds(), At: start.UTC()}
		if len(c.TypeNames) > 0 {
			ar.ErrorType = c.TypeNames[0]
		}
		hist = append(hist, ar)
		d := retry.Decide(retry.Input{Policy: pol, History: history, Current: a})
		history = append(history, a)
		if d.Action != retry.ActionRetry || n >= pol.MaxAttempts {
			return n, hist, err
		}
		s.log.Info().Str("saga_id", sg.ID).Str("kind", string(sg.Kind)).Int("attempt", n).Dur("retry_in", d.Delay).Err(err).Msg("compensation failed; retrying")
		if !sleepCtx(ctx, d.Delay) {
			return n, hist, fmt.Errorf("%w: %w", errInterrupted, ctx.Err())
		}
	}
}

// call runs h, turning a panic into a terminal error.
func call(ctx context.Context, h CompensationFunc, req *schemas.CompensationRequest) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = handlers.Terminal(fmt.Errorf("%w: %v", handlers.ErrPanic, p))
		}
	}()
	return h(ctx, req)
}

// writeRecord stores the compensation_failed record of a quarantined saga
// and notes its sequence in the saga. The record id is fixed per saga and
// request, so a retry stores one record.
func (s *Sweeper) writeRecord(ctx context.Context, kv jetstream.KeyValue, sg *Saga) error {
	req := sg.Request
	if req == nil {
		req = &schemas.CompensationRequest{SagaID: sg.ID, Kind: sg.Kind, Target: sg.Target}
	}
	rec := &schemas.QuarantineRecord{
		SchemaVersion: schemas.Version, ID: "c." + sg.ID + "." + req.RequestID, Reason: schemas.ReasonCompensationFailed,
		Detail: sg.TerminalReason + fmt.Sprintf("; saga %s is parked as QUARANTINED: nothing was recorded as compensated, "+
			"a person must finish or undo %s %s by hand (or fix the cause and replay this record)", sg.ID, sg.Kind, sg.Target),
		OriginalSubject: s.topo.Subject(sg.Kind), Headers: sg.Headers, Payload: sg.Payload,
		Stream: sg.SourceStream, Sequence: sg.SourceSeq, Attempts: sg.Attempts, Errors: sg.Errors,
		RequestID: req.RequestID, TaskID: req.TaskID, SagaID: sg.ID, CorrelationID: req.CorrelationID,
		QuarantinedAt: s.now().UTC(),
	}
	if rec.Payload == nil {
		if data, err := schemas.Encode(req); err == nil {
			rec.Payload = data
		} else {
			rec.Payload = []byte{}
		}
	}
	if n := len(sg.Errors); n > 0 {
		rec.FirstFailureAt, rec.LastFailureAt = sg.Errors[0].At, sg.Errors[n-1].At
	}
	qseq, _, err := s.w.Put(ctx, rec)
	if err != nil {
		return err
	}
	next := *sg
	next.QuarantineSeq = qseq
	if _, err := kv.Update(ctx, SagaKey(sg.ID), next.encode(), sg.Revision); err != nil {
		s.log.Warn().Err(err).Str("saga_id", sg.ID).Msg("quarantine seq not noted in the saga; the next sweep rewrites the same record")
	}
	return nil
}
