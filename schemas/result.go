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
	AttemptStarted AttemptKind = "started"
	AttemptFailed  AttemptKind = "failed"
	// AttemptWaiting: the request was received but cannot start yet; its
	// WaitingFor says on what. It runs when that is back (nothing counted).
	AttemptWaiting AttemptKind = "waiting"
)

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
}

// DecodeAttemptEvent decodes and validates an AttemptEvent.
func DecodeAttemptEvent(data []byte) (*AttemptEvent, error) {
	return decode[AttemptEvent](attemptSchema, data)
}
