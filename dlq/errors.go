package dlq

import (
	"errors"

	"github.com/personaq/personaq/schemas"
)

var (
	// ErrWrite wraps a failed quarantine write; the source message must then
	// be redelivered, never acked.
	ErrWrite = errors.New("quarantine write failed")
	// ErrNotFound is returned for an unknown record sequence.
	ErrNotFound = errors.New("quarantine record not found")
	// ErrStreamMissing is returned when the quarantine stream (or another
	// stream an operation needs) does not exist.
	ErrStreamMissing = errors.New("quarantine stream missing")
	// ErrInvalidConfig wraps every configuration error, naming the field. It
	// is schemas.ErrInvalidConfig, the same error in every personaq package:
	// errors.Is matches it whichever package returned it.
	ErrInvalidConfig = schemas.ErrInvalidConfig
	// ErrInvalidFilter is returned for a Filter that names an unknown
	// reason or a persona that is not a subject token.
	ErrInvalidFilter = errors.New("invalid quarantine filter")
	// ErrPayloadMissing is returned when the object store object holding a
	// record's payload (or headers) is gone, or its bucket is.
	ErrPayloadMissing = errors.New("quarantined payload missing")
	// ErrPayloadCorrupt is returned when that object's size or digest is not
	// the one its record references.
	ErrPayloadCorrupt = errors.New("quarantined payload does not match its record")
)
