package wire

import (
	"context"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/personaq/personaq/schemas"
)

// Cancellation asks for one request to stop.
type Cancellation struct {
	// RequestID is the request to stop. Required.
	RequestID string
	// Persona, TaskID and Step describe it in the record. Persona is
	// required (it is part of the record's subject); TaskID and Step
	// default to "unknown".
	Persona, TaskID, Step string
	// Reason is the text the caller gave (kept as the record's detail).
	Reason string
	// By names who asked (an API token's name, "cli", "console").
	By string
	// Attempts is how many attempts had started, when known.
	Attempts int
	// CorrelationID and SubmittedAt are copied into the record.
	CorrelationID string
	SubmittedAt   time.Time
}

// CancelledRecord is the terminal record a cancel writes.
func (c Cancellation) CancelledRecord(now time.Time) *schemas.OutcomeEvent {
	ev := &schemas.OutcomeEvent{
		SchemaVersion: schemas.Version, RequestID: c.RequestID, TaskID: c.TaskID, Step: c.Step,
		Persona: c.Persona, Outcome: schemas.OutcomeCancelled, Reason: schemas.ReasonCancelled,
		Attempts: c.Attempts, CorrelationID: c.CorrelationID, At: now.UTC(), Detail: c.Reason,
		CancelledBy: c.By, SubmittedAt: c.SubmittedAt.UTC(),
	}
	if ev.TaskID == "" {
		ev.TaskID = "unknown"
	}
	if ev.Step == "" {
		ev.Step = "unknown"
	}
	if !c.SubmittedAt.IsZero() {
		ev.DurationMs = max(now.Sub(c.SubmittedAt).Milliseconds(), 0)
	}
	return ev
}

// Cancel ends a request as cancelled: its terminal record is written with
// the same create-once write as every other ending, so a cancel racing a
// success (or any other ending) ends the request as exactly one of them.
// The record's publish is itself the live notice the replicas follow (a
// core-NATS subscription on the cancelled records' subjects): a queued
// request is then never run, a held retry never runs again, and a running
// attempt is stopped. It returns the record that stands; when
// that is not the cancel, the error matches ErrAlreadyEnded.
func Cancel(ctx context.Context, js jetstream.JetStream, t Topology, c Cancellation) (*schemas.OutcomeEvent, error) {
	if c.RequestID == "" || c.Persona == "" {
		return nil, fmt.Errorf("%w: cancel: request id and persona are required", ErrInvalidConfig)
	}
	t = t.WithDefaults()
	rec, won, err := NewOutcomes(js, t).Create(ctx, c.CancelledRecord(time.Now()), nil)
	if err != nil {
		return nil, fmt.Errorf("cancel request %s: %w", c.RequestID, err)
	}
	if !won {
		return rec, fmt.Errorf("cancel request %s: %w as %s", c.RequestID, ErrAlreadyEnded, rec.Outcome)
	}
	return rec, nil
}
