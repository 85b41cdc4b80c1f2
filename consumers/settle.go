package consumers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime/debug"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/personaq/personaq/consumers/transport"
	"github.com/personaq/personaq/schemas"
)

// faultDelay is how long a message waits after a fault in personaq itself
// (quarantine write failed, a bug): it is redelivered, never lost.
const faultDelay = 5 * time.Second

// settleMiddleware is the outermost link: it creates the attempt state, runs
// the chain and then settles the message from the verdict. It never returns
// an error to the router: every message is acked or nacked here.
func (r *Runtime) settleMiddleware(next message.HandlerFunc) message.HandlerFunc {
	return func(msg *message.Message) (_ []*message.Message, _ error) {
		st, err := r.newState(msg)
		if err != nil {
			r.log.Error().Err(err).Str("message", msg.UUID).Msg("cannot route message; releasing")
			transport.NackWithDelay(msg, faultDelay)
			return nil, nil
		}
		defer func() {
			if p := recover(); p != nil {
				st.log.Error().Interface("panic", p).Bytes("stack", debug.Stack()).Msg("personaq pipeline panicked; message released")
				transport.NackWithDelay(msg, faultDelay)
			}
		}()
		if _, err := next(msg); err != nil {
			st.log.Error().Err(err).Msg("pipeline error; message released")
			transport.NackWithDelay(msg, faultDelay)
			return nil, nil
		}
		r.tracedApply(msg, st)
		return nil, nil
	}
}

func (r *Runtime) newState(msg *message.Message) (*attemptState, error) {
	d, ok := transport.DeliveryFrom(msg.Context())
	if !ok {
		return nil, fmt.Errorf("message %s has no JetStream delivery", msg.UUID)
	}
	p, ok := r.personas[message.SubscribeTopicFromCtx(msg.Context())]
	if !ok {
		return nil, fmt.Errorf("%w: topic %q", ErrUnknownPersona, message.SubscribeTopicFromCtx(msg.Context()))
	}
	st := &attemptState{
		persona: p, delivery: d, started: r.now(),
		log: r.log.With().Str("persona", p.name).Uint64("stream_seq", d.Sequence).Logger(),
	}
	withState(msg, st)
	return st, nil
}

// apply settles msg according to st.verdict. Every ending goes through
// the request's terminal record, confirmed before the message is settled:
// a crash in between redelivers the message, which finds the record and is
// settled without running again.
//
// Every settle is fenced first: a delivery whose attempt lost its lease, or
// whose claim on the message lapsed, settles nothing (stale settle refused).
func (r *Runtime) apply(msg *message.Message, st *attemptState) {
	if st.verdict == verdictFenced || r.stale(st, verdictOp(st.verdict)) {
		transport.ReleaseFenced(msg)
		return
	}
	switch st.verdict {
	case verdictAck:
		if st.final == nil && r.conclude(st, schemas.OutcomeSucceeded, 0) != nil {
			transport.NackWithDelay(msg, faultDelay)
			return
		}
		r.settleFinal(msg, st)
	case verdictSettled:
		r.settleFinal(msg, st)
	case verdictRetry, verdictRelease:
		transport.NackWithDelay(msg, st.delay)
	case verdictQuarantine:
		r.quarantine(msg, st)
	default:
		st.log.Error().Msg("pipeline reached no verdict; message released")
		transport.NackWithDelay(msg, faultDelay)
	}
}

// quarantine stores the record first and only then the terminal record and
// the Term; if a write fails the message is redelivered (never lost). A
// request that already has a terminal record gets no quarantine record.
func (r *Runtime) quarantine(msg *message.Message, st *attemptState) {
	if r.crashed(msg, st, stepDecided) {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), settleTimeout)
	defer cancel()
	if st.stored == nil {
		if final, err := r.outcomes.Lookup(ctx, outcomeKey(st)); err == nil {
			st.final = final
			reason := schemas.Reason(st.decision.Reason)
			r.standing(st, outcomeFor(reason), reason, final)
			r.settleFinal(msg, st)
			return
		}
	}
	if r.stale(st, "quarantine record") {
		transport.ReleaseFenced(msg)
		return
	}
	rec, seq, fresh, err := r.storeRecord(ctx, msg, st)
	if errors.Is(err, errSimulatedCrash) {
		transport.ReleaseFenced(msg) // test hook: the record is published, its index entry is not
		return
	}
	if err != nil {
		transport.NackWithDelay(msg, faultDelay)
		return
	}
	if r.crashed(msg, st, stepRecordIndexed) {
		return
	}
	if r.stale(st, "terminal record") {
		transport.ReleaseFenced(msg) // the record stays; a redelivery finds it (quarantinedBefore)
		return
	}
	if err := r.conclude(st, outcomeFor(rec.Reason), seq); err != nil {
		transport.NackWithDelay(msg, faultDelay)
		return
	}
	if fresh && st.final.QuarantineSeq != seq {
		r.withdrawRecord(ctx, st, seq)
	}
	if r.crashed(msg, st, stepConcluded) {
		return
	}
	r.settleFinal(msg, st)
}

// quarantineStep names a step of the quarantine path after which a crash
// leaves the request half-ended: a test hook (CrashQuarantineAt in
// export_test.go) abandons a delivery there, unsettled, as a SIGKILL would.
// Whichever step it is, the redelivery must not run the handler again nor
// store a second record, and the request ends with one terminal record.
type quarantineStep int32

const (
	stepNone quarantineStep = iota
	// stepDecided: the attempt is recorded in the ledger and its decision
	// ends the request; nothing of the ending is stored yet.
	stepDecided
	// stepRecordPublished: the record is on the quarantine stream; the
	// index holds only the writer's reservation.
	stepRecordPublished
	// stepRecordIndexed: the index names the record; no terminal record.
	stepRecordIndexed
	// stepConcluded: the terminal record is stored; the message not termed.
	stepConcluded
)

// errSimulatedCrash is what the quarantine writer's test hook returns at
// stepRecordPublished.
var errSimulatedCrash = errors.New("simulated crash after publishing the quarantine record (test hook)")

// crashed reports whether the test hook abandons this delivery at step
// (once per arming), releasing it unsettled.
func (r *Runtime) crashed(msg *message.Message, st *attemptState, step quarantineStep) bool {
	if !r.crashAt.CompareAndSwap(int32(step), int32(stepNone)) {
		return false
	}
	st.log.Warn().Int("step", int(step)).Msg("test hook: simulated crash in the quarantine path; delivery abandoned unsettled")
	transport.ReleaseFenced(msg)
	return true
}

// crashAfterPublish is the quarantine writer's test hook for
// stepRecordPublished.
func (r *Runtime) crashAfterPublish() error {
	if r.crashAt.CompareAndSwap(int32(stepRecordPublished), int32(stepNone)) {
		return errSimulatedCrash
	}
	return nil
}

// settleFinal settles the message the way the standing record says, if
// this delivery still holds it.
func (r *Runtime) settleFinal(msg *message.Message, st *attemptState) {
	if r.stale(st, verdictOp(verdictSettled)) {
		transport.ReleaseFenced(msg)
		return
	}
	settleFinal(msg, st.final)
}

// stale reports whether this delivery must not make the settle op: its
// attempt's lease, or its claim on the message, lapsed. A refused settle
// is logged and counted, and the verdict becomes verdictFenced.
func (r *Runtime) stale(st *attemptState, op string) bool {
	if st.delivery.Held() && st.lease.valid(time.Now()) {
		return false
	}
	st.lease.lose()
	st.delivery.Fence()
	r.refuseStale(st, op)
	return true
}

// refuseStale logs and counts a settle refused to a stale holder.
func (r *Runtime) refuseStale(st *attemptState, op string) {
	st.verdict = verdictFenced
	st.log.Warn().Int("attempt", st.attempt.Number).Str("op", op).
		Msg("stale settle refused: this replica lost the attempt's lease; the request is left to its current holder")
	if o, ok := r.obs.(FenceObserver); ok {
		o.StaleSettle(st.persona.name, op)
	}
}

// verdictOp names the settle a verdict makes, for logs and counts.
func verdictOp(v verdict) string {
	switch v {
	case verdictAck, verdictSettled:
		return "ack"
	case verdictRetry, verdictRelease:
		return "nak"
	case verdictQuarantine:
		return "term"
	}
	return "settle"
}

// storeRecord writes the quarantine record (idempotently) unless an
// earlier delivery did; fresh says this call stored it.
func (r *Runtime) storeRecord(ctx context.Context, msg *message.Message, st *attemptState) (*schemas.QuarantineRecord, uint64, bool, error) {
	if st.stored != nil {
		return st.stored, st.storedSeq, false, nil
	}
	rec := r.record(msg, st)
	seq, dup, err := r.dlq.Put(ctx, rec)
	if err != nil {
		st.log.Error().Err(err).Str("reason", string(rec.Reason)).Msg("quarantine write failed; message will be redelivered")
		return nil, 0, false, err
	}
	if dup {
		st.log.Info().Uint64("quarantine_seq", seq).Msg("quarantine record already stored; duplicate skipped")
	}
	st.stored, st.storedSeq = rec, seq
	return rec, seq, !dup, nil
}

// withdrawRecord removes a quarantine record this delivery just stored for a
// request whose terminal record says otherwise (another replica settled it
// first): a record must not say a request stopped when it did not.
func (r *Runtime) withdrawRecord(ctx context.Context, st *attemptState, seq uint64) {
	err := deleteMsg(ctx, r.js, r.topo.QuarantineStream, seq)
	st.log.Warn().Err(err).Uint64("quarantine_seq", seq).Str("recorded_outcome", string(st.final.Outcome)).
		Msg("quarantine record withdrawn: the request's terminal record says otherwise")
}

// deleteMsg removes message seq from stream through the API subject alone
// (a replica may delete quarantine records it wrote without the right to
// read the stream's info, which jetstream.Stream needs).
func deleteMsg(ctx context.Context, js jetstream.JetStream, stream string, seq uint64) error {
	body, _ := json.Marshal(map[string]any{"seq": seq})
	resp, err := js.Conn().RequestWithContext(ctx, "$JS.API.STREAM.MSG.DELETE."+stream, body)
	if err != nil {
		return fmt.Errorf("delete %s seq %d: %w", stream, seq, err)
	}
	var out struct {
		Success bool                `json:"success"`
		Error   *jetstream.APIError `json:"error"`
	}
	if err := json.Unmarshal(resp.Data, &out); err != nil {
		return fmt.Errorf("delete %s seq %d: %w", stream, seq, err)
	}
	if out.Error != nil {
		return fmt.Errorf("delete %s seq %d: %w", stream, seq, out.Error)
	}
	return nil
}
