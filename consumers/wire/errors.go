package wire

import (
	"errors"
	"fmt"

	"github.com/personaq/personaq/handlers"
	"github.com/personaq/personaq/schemas"
)

// ErrInvalidConfig wraps every configuration error, naming the field. It
// is schemas.ErrInvalidConfig, the same error in every personaq package:
// errors.Is matches it whichever package returned it.
var ErrInvalidConfig = schemas.ErrInvalidConfig

// ErrUnknownPersona: a request names a persona no replica serves (no
// durable consumer), or a message names one with no registered handler.
var ErrUnknownPersona = errors.New("unknown persona")

// ErrNoOutcome: the request has no terminal record (yet, or any more: the
// outcomes stream keeps them for Topology.OutcomesMaxAge).
var ErrNoOutcome = errors.New("no terminal record")

// ErrConflict: the request id was already submitted with other content
// (see schemas.RequestDigest). Errors matching it are *ConflictError.
var ErrConflict = errors.New("request id already submitted with other content")

// ConflictError is a refused submit: RequestID was already used for a
// request whose content digest (StoredDigest) differs from this one's.
// Queued, Record and Stored hold what was found of the first request, when
// found (the queued event, the terminal record, the stored request).
type ConflictError struct {
	RequestID    string
	Digest       string
	StoredDigest string
	Queued       *schemas.AttemptEvent
	Record       *schemas.OutcomeEvent
	Stored       *schemas.PersonaRequest
}

func (e *ConflictError) Error() string {
	return fmt.Sprintf("%s: request %s (stored digest %s, this one %s)", ErrConflict, e.RequestID, e.StoredDigest, e.Digest)
}

// Is matches ErrConflict.
func (e *ConflictError) Is(target error) bool { return target == ErrConflict }

// ErrNoAttemptEvent: no attempt event of that kind was found for the
// request — for a queued event: never submitted through a submit path (a
// raw NATS publisher), or forgotten (the attempts stream keeps events for
// Topology.AttemptsMaxAge, in memory).
var ErrNoAttemptEvent = errors.New("no attempt event")

// ErrCancelled is the cause of a running attempt's context when its request
// was cancelled: a Go handler sees context.Cause(ctx) == ErrCancelled. It is
// also what the clients' cancelled errors match.
var ErrCancelled = handlers.ErrCancelled

// ErrAlreadyEnded: a cancel found the request already ended (its terminal
// record is another one, returned beside the error).
var ErrAlreadyEnded = errors.New("request already ended")

// ErrUnknownRequest: no open request and no terminal record has this id.
var ErrUnknownRequest = errors.New("unknown request")
