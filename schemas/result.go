package schemas

import "time"

// ObjectRef points at a blob kept in a JetStream object store bucket
// (a persona's answer too large to keep inline in its terminal record).
type ObjectRef struct {
	Bucket string `json:"bucket"`
	Name   string `json:"name"`
	Size   int64  `json:"size"`
	// Digest is the object store's digest, "SHA-256=<base64url>".
	Digest string `json:"digest"`
}

// AttemptKind says what an AttemptEvent reports.
type AttemptKind string

// Attempt event kinds.
const (
	// AttemptQueued: the request was stored (published by every submit
	// path after JetStream confirmed it; Attempt is 0). It carries the
	// step deadline, created_at and the request's content digest.
	AttemptQueued  AttemptKind = "queued"
	AttemptStarted AttemptKind = "started"
	AttemptFailed  AttemptKind = "failed"
	// AttemptCancelled: the running attempt was stopped by a cancel; it
	// is not a failure and is not retried.
	AttemptCancelled AttemptKind = "cancelled"
	// AttemptWaiting: the request was received but cannot start yet; its
	// WaitingFor says on what. It runs when that is back (nothing counted).
	AttemptWaiting AttemptKind = "waiting"
)

// AttemptKinds lists every attempt event kind, in a stable order.
var AttemptKinds = []AttemptKind{AttemptQueued, AttemptStarted, AttemptFailed, AttemptCancelled, AttemptWaiting}

// WaitingForLedger is the WaitingFor of a request held while the attempt
// ledger (Redis) cannot be reached.
const WaitingForLedger = "attempt_ledger"

// AttemptEvent reports one attempt of a request as it happens: its start,
// and, when it failed, why and what happens next. They are informational
// (published without waiting, kept for a bounded time): the terminal record
// (OutcomeEvent) is what a caller acts on.
type AttemptEvent struct {
	SchemaVersion int         `json:"schema_version"`
	RequestID     string      `json:"request_id"`
	TaskID        string      `json:"task_id"`
	Step          string      `json:"step"`
	Persona       string      `json:"persona"`
	Kind          AttemptKind `json:"kind"`
	// Attempt is the attempt's number (0 for a waiting request, not yet
	// numbered).
	Attempt     int    `json:"attempt"`
	MaxAttempts int    `json:"max_attempts,omitempty"`
	Agent       string `json:"agent,omitempty"`
	// Class is how a failed attempt was classified (retryable, timeout, …).
	Class    string    `json:"class,omitempty"`
	Error    string    `json:"error,omitempty"`
	Progress *Progress `json:"progress,omitempty"`
	// DurationMs is how long a failed attempt ran.
	DurationMs int64 `json:"duration_ms,omitempty"`
	// NextAttempt, NextAgent and NextDelayMs say when and by whom the
	// request is retried; zero when the failure ended it.
	NextAttempt   int       `json:"next_attempt,omitempty"`
	NextAgent     string    `json:"next_agent,omitempty"`
	NextDelayMs   int64     `json:"next_delay_ms,omitempty"`
	CorrelationID string    `json:"correlation_id,omitempty"`
	At            time.Time `json:"at"`
	// WaitingFor names what a waiting request waits for
	// (WaitingForLedger); empty for other kinds.
	WaitingFor string `json:"waiting_for,omitempty"`
	// Usage is what a failed attempt reported consuming; absent when
	// nothing.
	Usage *Usage `json:"usage,omitempty"`
	// Deadline is the step deadline the request was sent with (queued
	// events; absent when none).
	Deadline time.Time `json:"deadline,omitzero"`
	// CreatedAt is the request's created_at (queued events).
	CreatedAt time.Time `json:"created_at,omitzero"`
	// RequestDigest is RequestDigest of the request (queued events): a
	// submit of the same request id with another digest is a conflict.
	RequestDigest string `json:"request_digest,omitempty"`
}

// DecodeAttemptEvent decodes and validates an AttemptEvent.
func DecodeAttemptEvent(data []byte) (*AttemptEvent, error) {
	return decode[AttemptEvent](attemptSchema, data)
}
