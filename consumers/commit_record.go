package consumers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/personaq/personaq/schemas"
)

// The quarantine record, commit's step before the terminal record.

// storeQuarantine stores a quarantine's record (idempotently) unless an
// earlier delivery did, before the terminal record that names it; if the
// write fails the message is released (never lost). A request that already
// has a terminal record gets no quarantine record: it is settled by that one.
func (r *Runtime) storeQuarantine(st *attemptState, end ending) ending {
	if end.verdict != verdictQuarantine {
		return end
	}
	if r.crashed(st, stepDecided) {
		return fenced
	}
	ctx, cancel := context.WithTimeout(context.Background(), settleTimeout)
	defer cancel()
	if end.stored == nil {
		if final, err := r.outcomes.Lookup(ctx, outcomeKey(st)); err == nil {
			reason := end.decision.Reason
			r.standing(st, outcomeFor(reason), reason, final)
			end.final = final
			return end
		}
	}
	if r.stale(st, "quarantine record") {
		return fenced
	}
	fresh, err := r.storeRecord(ctx, st, &end)
	switch {
	case errors.Is(err, errSimulatedCrash):
		return fenced // test hook: the record is published, its index entry is not
	case err != nil:
		return released(faultDelay)
	case r.crashed(st, stepRecordIndexed):
		return fenced
	}
	end.freshRecord = fresh
	return end
}

// storeRecord writes the quarantine record (idempotently) unless an
// earlier delivery did, setting end.stored; fresh says this call stored it.
func (r *Runtime) storeRecord(ctx context.Context, st *attemptState, end *ending) (fresh bool, err error) {
	if end.stored != nil {
		return false, nil
	}
	rec := r.record(st, end.decision)
	if rec.Reason == schemas.ReasonMaxDeliveries {
		r.annotate(ctx, rec) // the ledger's history, as the advisory listener's record has
	}
	seq, dup, err := r.dlq.Put(ctx, rec)
	if err != nil {
		st.log.Error().Err(err).Str("reason", string(rec.Reason)).Msg("quarantine write failed; message will be redelivered")
		return false, err
	}
	if dup {
		st.log.Info().Uint64("quarantine_seq", seq).Msg("quarantine record already stored; duplicate skipped")
	}
	end.stored, end.storedSeq = rec, seq
	return !dup, nil
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
// (once per arming): commit then settles nothing.
func (r *Runtime) crashed(st *attemptState, step quarantineStep) bool {
	if !r.crashAt.CompareAndSwap(int32(step), int32(stepNone)) {
		return false
	}
	st.log.Warn().Int("step", int(step)).Msg("test hook: simulated crash in the quarantine path; delivery abandoned unsettled")
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
