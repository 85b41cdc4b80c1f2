package consumers

import (
	"context"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/personaq/personaq/dlq"
	"github.com/personaq/personaq/schemas"
)

// While the attempt ledger is down the pull is stopped (ledgerGate), so a
// request published meanwhile is not delivered, and its caller would hear
// nothing until its step deadline. The outage rule of the waiting-request
// scan (waitscan.go) reads those requests where they wait, without a
// delivery (a read by sequence counts nothing toward MaxDeliver), and
// tells each caller once that it waits for the ledger; a
// request whose step deadline passes meanwhile is ended there:
// deadline_exceeded, saying the ledger was down, with its quarantine and
// terminal records (create-once; its message, delivered once the ledger is
// back, is termed the way that record says, unrun).

// outageRule is the waiting-request scan's rule while the ledger is down
// (waitscan.go); told holds what it did, by request message sequence, and
// is forgotten once the ledger is back.
type outageRule struct {
	r    *Runtime
	told map[uint64]waitState
}

func newOutageRule(r *Runtime) *outageRule {
	return &outageRule{r: r, told: map[uint64]waitState{}}
}

// active reports whether the ledger is down (the rule runs only then).
func (o *outageRule) active() bool {
	if o.r.ledger == nil || !o.r.health.ledgerDown.Load() {
		clear(o.told)
		return false
	}
	return true
}

// pass reads persona's waiting requests from the stream's first sequence.
func (o *outageRule) pass(ctx context.Context, persona string) {
	s, err := o.r.js.Stream(ctx, o.r.topo.RequestsStream)
	if err != nil {
		return
	}
	info, err := s.Info(ctx)
	if err != nil {
		return
	}
	from := info.State.FirstSeq
	if c, err := o.r.js.Consumer(ctx, o.r.topo.RequestsStream, Durable(persona)); err == nil && info.Config.Retention == jetstream.LimitsPolicy {
		from = max(from, c.CachedInfo().AckFloor.Stream+1) // below: acked, waiting to be trimmed
	}
	o.r.readWaiting(ctx, s, persona, from, func(raw *jetstream.RawStreamMsg) {
		if o.told[raw.Sequence] != waitEnded {
			o.told[raw.Sequence] = o.r.tellWaiting(ctx, persona, raw, o.told[raw.Sequence])
		}
	})
}

// waitState is what the outage scan did with a waiting request.
type waitState uint8

const (
	waitNew   waitState = iota // nothing yet
	waitTold                   // its caller was told it waits
	waitEnded                  // ended (step deadline), or nothing to do
)

// tellWaiting tells the caller of the request in raw, once, that it waits
// for the ledger, and ends it when its step deadline has passed. It
// returns the request's state after this pass.
func (r *Runtime) tellWaiting(ctx context.Context, persona string, raw *jetstream.RawStreamMsg, was waitState) waitState {
	req, err := schemas.DecodeRequest(raw.Data)
	if err != nil {
		return waitEnded // the pipeline quarantines it once delivered
	}
	deadline, err := parseDeadline(raw.Header.Get(schemas.HeaderDeadline))
	if err == nil && !deadline.IsZero() && !r.now().Before(deadline) {
		if r.endWaiting(ctx, persona, raw, req, deadline) != nil {
			return was
		}
		return waitEnded
	}
	if was == waitTold || r.cfg.NoAttemptEvents {
		return waitTold
	}
	ev := &schemas.AttemptEvent{
		SchemaVersion: schemas.Version, RequestID: req.RequestID, TaskID: req.TaskID, Step: req.Step, Persona: persona,
		Kind: schemas.AttemptWaiting, WaitingFor: schemas.WaitingForLedger, CorrelationID: req.CorrelationID, At: r.now().UTC(),
		Error: "Redis unreachable: no request is pulled until it is back",
	}
	data, err := schemas.MarshalAttempt(ev)
	if err == nil {
		err = r.js.Conn().Publish(r.topo.AttemptSubject(ev.RequestID, string(ev.Kind)), data)
	}
	if err != nil {
		return waitNew
	}
	return waitTold
}

// endWaiting ends a waiting request whose step deadline passed during the
// outage: quarantine record, then terminal record.
func (r *Runtime) endWaiting(ctx context.Context, persona string, raw *jetstream.RawStreamMsg, req *schemas.PersonaRequest, deadline time.Time) error {
	wctx, cancel := context.WithTimeout(ctx, settleTimeout)
	defer cancel()
	d := deadlineDecision(deadline, "passed while the attempt ledger (Redis) was unreachable (the request waited unstarted); not run")
	now := r.now().UTC()
	rec := &schemas.QuarantineRecord{
		SchemaVersion: schemas.Version, ID: dlq.RecordID(r.topo.RequestsStream, raw.Sequence), Reason: d.Reason, Detail: d.Detail,
		OriginalSubject: raw.Subject, Headers: map[string][]string(raw.Header), Payload: raw.Data,
		Stream: r.topo.RequestsStream, Sequence: raw.Sequence, Persona: persona, RequestID: req.RequestID,
		TaskID: req.TaskID, Step: req.Step, CorrelationID: req.CorrelationID, QuarantinedAt: now,
	}
	if rec.Payload == nil {
		rec.Payload = []byte{}
	}
	qseq, _, err := r.dlq.Put(wctx, rec)
	if err != nil {
		return err
	}
	ev := &schemas.OutcomeEvent{
		SchemaVersion: schemas.Version, RequestID: req.RequestID, TaskID: req.TaskID, Step: req.Step, Persona: persona,
		Outcome: schemas.OutcomeDeadlineExceeded, Reason: d.Reason, Detail: d.Detail, QuarantineSeq: qseq,
		CorrelationID: req.CorrelationID, SubmittedAt: req.CreatedAt.UTC(), At: now,
		DurationMs: max(now.Sub(req.CreatedAt).Milliseconds(), 0),
	}
	_, won, err := r.outcomes.create(wctx, ev)
	if err != nil {
		return err
	}
	if won {
		r.obs.Outcome(persona, ev.Outcome, ev.Reason)
		r.log.Warn().Str("persona", persona).Str("request_id", req.RequestID).Time("deadline", deadline).
			Uint64("quarantine_seq", qseq).Msg("Step deadline passed while the attempt ledger was unreachable; request ends unstarted")
	}
	return nil
}
