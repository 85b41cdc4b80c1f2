package consumers

import (
	"context"
	"encoding/json"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/personaq/personaq/dlq"
	"github.com/personaq/personaq/retry"
	"github.com/personaq/personaq/schemas"
)

// record builds the quarantine record of the message: original subject,
// headers and payload untouched, the decision's reason and detail, and the
// whole attempt history.
func (r *Runtime) record(msg *message.Message, st *attemptState) *schemas.QuarantineRecord {
	d := st.delivery
	rec := &schemas.QuarantineRecord{
		SchemaVersion:   schemas.Version,
		ID:              dlq.RecordID(d.Stream, d.Sequence),
		Reason:          schemas.Reason(st.decision.Reason),
		Detail:          st.decision.Detail,
		OriginalSubject: d.Subject,
		Headers:         map[string][]string(d.Msg.Headers()),
		Payload:         msg.Payload,
		Stream:          d.Stream,
		Sequence:        d.Sequence,
		Deliveries:      d.Delivered,
		Persona:         st.persona.name,
		CorrelationID:   st.corrID,
		QuarantinedAt:   r.now().UTC(),
	}
	if st.req != nil {
		rec.RequestID, rec.TaskID, rec.Step = st.req.RequestID, st.req.TaskID, st.req.Step
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
	for _, a := range all {
		rec.Errors = append(rec.Errors, attemptRecord(a))
	}
	if len(all) > 0 {
		rec.FirstFailureAt, rec.LastFailureAt = all[0].At.UTC(), all[len(all)-1].At.UTC()
	}
}

func attemptRecord(a retry.Attempt) schemas.AttemptRecord {
	ar := schemas.AttemptRecord{
		Attempt: a.Number, Agent: a.Agent, Class: a.Class.String(), Error: a.Error,
		DurationMs: a.Duration.Milliseconds(), At: a.At.UTC(),
	}
	if len(a.ErrorTypes) > 0 {
		ar.ErrorType = a.ErrorTypes[0]
	}
	if a.Progress.Known() {
		ar.Progress = &schemas.Progress{Completed: a.Progress.Completed, Total: a.Progress.Total}
	}
	return ar
}

// publishOutcome emits the terminal outcome event and waits for the
// server: "done" means the event is stored. Its message id is derived from
// the request, so the republish after a crash is stored once.
func (r *Runtime) publishOutcome(st *attemptState, outcome schemas.Outcome, qseq uint64) error {
	ev := r.outcomeEvent(st, outcome, qseq)
	// Built here from validated parts, so it is marshalled without running
	// the schema validator again (the tests validate its shape).
	data, err := json.Marshal(ev)
	if err != nil {
		st.log.Error().Err(err).Msg("outcome event not encodable")
		return nil // a bug, not a reason to redeliver forever
	}
	msg := &nats.Msg{Subject: r.topo.OutcomeSubject(string(outcome), st.persona.name), Data: data, Header: nats.Header{}}
	msg.Header.Set(jetstream.MsgIDHeader, "outcome."+outcomeKey(st))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := r.js.PublishMsg(ctx, msg); err != nil {
		st.log.Error().Err(err).Msg("outcome event not stored; message will be redelivered")
		return err
	}
	r.obs.Outcome(st.persona.name, outcome, ev.Reason)
	return nil
}

// outcomeKey identifies the request an outcome belongs to: its request id,
// or where it was stored when it never decoded.
func outcomeKey(st *attemptState) string {
	if st.req != nil {
		return st.req.RequestID
	}
	return st.delivery.Stream + "." + strconv.FormatUint(st.delivery.Sequence, 10)
}

func (r *Runtime) outcomeEvent(st *attemptState, outcome schemas.Outcome, qseq uint64) *schemas.OutcomeEvent {
	ev := &schemas.OutcomeEvent{
		SchemaVersion: schemas.Version, Outcome: outcome, Persona: st.persona.name,
		Reason: schemas.Reason(st.decision.Reason), Attempts: st.attempt.Number,
		Agent: st.attempt.Agent, CorrelationID: st.corrID, QuarantineSeq: qseq,
		DurationMs: time.Since(st.started).Milliseconds(), At: r.now().UTC(), LastError: st.attempt.Error,
	}
	if st.stored != nil {
		ev.Reason, ev.Attempts = st.stored.Reason, st.stored.Attempts
	}
	if st.req != nil {
		ev.RequestID, ev.TaskID, ev.Step = st.req.RequestID, st.req.TaskID, st.req.Step
	} else {
		ev.RequestID, ev.TaskID, ev.Step = "unknown", "unknown", "unknown"
	}
	if p := st.attempt.Progress; p.Known() {
		ev.Progress = &schemas.Progress{Completed: p.Completed, Total: p.Total}
	}
	return ev
}
