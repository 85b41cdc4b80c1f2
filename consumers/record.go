package consumers

import (
	"fmt"

	"github.com/personaq/personaq/dlq"
	"github.com/personaq/personaq/retry"
	"github.com/personaq/personaq/schemas"
)

// record builds the quarantine record of the message: original subject,
// headers and payload untouched, the decision's reason and detail, and the
// whole attempt history.
func (r *Runtime) record(st *attemptState, dec retry.Decision) *schemas.QuarantineRecord {
	d := st.delivery
	rec := &schemas.QuarantineRecord{
		SchemaVersion:   schemas.Version,
		ID:              dlq.RecordID(d.Stream, d.Sequence),
		Reason:          dec.Reason,
		Detail:          dec.Detail,
		OriginalSubject: d.Subject,
		Headers:         map[string][]string(d.Header()),
		Payload:         d.Data(),
		Stream:          d.Stream,
		Sequence:        d.Sequence,
		Deliveries:      d.Delivered,
		Persona:         st.persona.name,
		CorrelationID:   st.corrID,
		QuarantinedAt:   r.now().UTC(),
	}
	if st.req != nil {
		rec.RequestID, rec.TaskID, rec.Step = st.req.RequestID, st.req.TaskID, st.req.Step
	} else {
		rec.RequestID = st.rawID
	}
	r.addHistory(rec, st)
	return rec
}

func (r *Runtime) addHistory(rec *schemas.QuarantineRecord, st *attemptState) {
	all := st.history
	if st.attempt.Number > 0 && st.attempt.Class.Failed() {
		all = append(all[:len(all):len(all)], st.attempt)
	}
	rec.Attempts = len(all)
	if n := st.attempt.Number; n > len(all) {
		// The ledger lost earlier attempts (Redis wiped): their number came
		// from the broker's delivery count, their records are gone.
		rec.Attempts = n
		rec.Detail += fmt.Sprintf(" [attempts: %d is a lower bound taken from the broker's delivery count; "+
			"the attempt ledger lost the records of %d of them (Redis wiped), so the history is partial]", n, n-len(all))
	}
	for _, a := range all {
		rec.Errors = append(rec.Errors, a.Record())
	}
	if len(all) > 0 {
		rec.FirstFailureAt, rec.LastFailureAt = all[0].At.UTC(), all[len(all)-1].At.UTC()
	}
	rec.Usage = retry.TotalUsage(all).Record()
}
