package consumers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/personaq/personaq/consumers/transport"
	"github.com/personaq/personaq/schemas"
)

// holdUnder is the longest retry delay this replica serves itself: the
// message is kept (heartbeated) and a plain Nak sent when it is due, since
// nats-server re-arms its redelivery timer on every nak and a NakWithDelay
// under a steady stream of naks comes back tens of ms to seconds late.
// Longer delays are a NakWithDelay: the server holds the message, and any
// replica may run the retry. (It configures the subscriber: router.)
const holdUnder = 5 * time.Second

// settle is the last stage and the only one that settles a message. Every
// ending that ends the request goes through its terminal record, confirmed
// before the message is settled: a crash in between redelivers the
// message, which finds the record and is settled without running again.
//
//	verdictAck         terminal record (succeeded, with the output), DoubleAck
//	verdictSettled     as the standing terminal record says: ack or term
//	verdictRetry       the next attempt after end.delay: held here when
//	verdictRelease     ≤ holdUnder, else NakWithDelay (release: uncounted)
//	verdictQuarantine  quarantine record, terminal record, then Term
//	verdictFenced      nothing: the message is left to the server
//
// A retry or release of a request cancelled meanwhile is settled as its
// cancelled record instead (termed: no further attempt).
//
// Every settle is fenced first: a delivery whose attempt lost its lease,
// or whose claim on the message lapsed, settles nothing (stale settle
// refused). end records the terminal record that stands.
func (r *Runtime) settle(msg *message.Message, st *attemptState, end *ending) {
	if end.verdict == verdictFenced || r.stale(st, verdictOp(end.verdict)) {
		end.verdict = verdictFenced
		transport.ReleaseFenced(msg)
		return
	}
	r.cancelledRetry(st, end)
	switch end.verdict {
	case verdictAck:
		if end.final == nil && r.conclude(st, end, schemas.OutcomeSucceeded, 0) != nil {
			transport.NackWithDelay(msg, faultDelay)
			return
		}
		r.settleFinal(msg, st, end)
	case verdictSettled:
		r.settleFinal(msg, st, end)
	case verdictRetry, verdictRelease:
		transport.NackWithDelay(msg, end.delay)
	case verdictQuarantine:
		r.quarantine(msg, st, end)
	default:
		st.log.Error().Msg("pipeline reached no verdict; message released")
		transport.NackWithDelay(msg, faultDelay)
	}
}

// quarantine stores the record first and only then the terminal record and
// the Term; if a write fails the message is redelivered (never lost). A
// request that already has a terminal record gets no quarantine record.
func (r *Runtime) quarantine(msg *message.Message, st *attemptState, end *ending) {
	if r.crashed(msg, st, stepDecided) {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), settleTimeout)
	defer cancel()
	if end.stored == nil {
		if final, err := r.outcomes.Lookup(ctx, outcomeKey(st)); err == nil {
			end.final = final
			reason := end.decision.Reason
			r.standing(st, outcomeFor(reason), reason, final)
			r.settleFinal(msg, st, end)
			return
		}
	}
	if r.stale(st, "quarantine record") {
		end.verdict = verdictFenced
		transport.ReleaseFenced(msg)
		return
	}
	rec, seq, fresh, err := r.storeRecord(ctx, msg, st, end)
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
		end.verdict = verdictFenced
		transport.ReleaseFenced(msg) // the record stays; a redelivery finds it (quarantinedBefore)
		return
	}
	if err := r.conclude(st, end, outcomeFor(rec.Reason), seq); err != nil {
		transport.NackWithDelay(msg, faultDelay)
		return
	}
	if fresh && end.final.QuarantineSeq != seq {
		r.withdrawRecord(ctx, st, end.final, seq)
	}
	if r.crashed(msg, st, stepConcluded) {
		return
	}
	r.settleFinal(msg, st, end)
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
func (r *Runtime) settleFinal(msg *message.Message, st *attemptState, end *ending) {
	if r.stale(st, verdictOp(verdictSettled)) {
		end.verdict = verdictFenced
		transport.ReleaseFenced(msg)
		return
	}
	settleFinal(msg, end.final)
}

// stale reports whether this delivery must not make the settle op: its
// attempt's lease, or its claim on the message, lapsed. A refused settle
// is logged and counted.
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
func (r *Runtime) storeRecord(ctx context.Context, msg *message.Message, st *attemptState, end *ending) (*schemas.QuarantineRecord, uint64, bool, error) {
	if end.stored != nil {
		return end.stored, end.storedSeq, false, nil
	}
	rec := r.record(msg, st, end.decision)
	if rec.Reason == schemas.ReasonMaxDeliveries {
		r.annotate(ctx, rec) // the ledger's history, as the advisory listener's record has
	}
	seq, dup, err := r.dlq.Put(ctx, rec)
	if err != nil {
		st.log.Error().Err(err).Str("reason", string(rec.Reason)).Msg("quarantine write failed; message will be redelivered")
		return nil, 0, false, err
	}
	if dup {
		st.log.Info().Uint64("quarantine_seq", seq).Msg("quarantine record already stored; duplicate skipped")
	}
	end.stored, end.storedSeq = rec, seq
	return rec, seq, !dup, nil
}

// withdrawRecord removes a quarantine record this delivery just stored for a
// request whose terminal record says otherwise (another replica settled it
// first): a record must not say a request stopped when it did not.
func (r *Runtime) withdrawRecord(ctx context.Context, st *attemptState, final *schemas.OutcomeEvent, seq uint64) {
	err := deleteMsg(ctx, r.js, r.topo.QuarantineStream, seq)
	st.log.Warn().Err(err).Uint64("quarantine_seq", seq).Str("recorded_outcome", string(final.Outcome)).
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
