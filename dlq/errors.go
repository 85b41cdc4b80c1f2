package dlq

import "errors"

var (
	// ErrWrite wraps a failed quarantine write; the source message must then
	// be redelivered, never acked.
	ErrWrite = errors.New("quarantine write failed")
	// ErrNotFound is returned for an unknown record sequence.
	ErrNotFound = errors.New("quarantine record not found")
	// ErrStreamMissing is returned when the quarantine stream does not exist.
	ErrStreamMissing = errors.New("quarantine stream missing")
)
