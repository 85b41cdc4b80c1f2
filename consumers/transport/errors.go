package transport

import (
	"errors"

	"github.com/personaq/personaq/schemas"
)

var (
	// ErrShuttingDown is the cancellation cause of a message's context when
	// Close ran out of DrainTimeout: its work is cut short and the message
	// released (Nak without delay) to another replica.
	ErrShuttingDown = errors.New("personaq: shutting down")
	// ErrLeaseLost is the cancellation cause of a message whose claim lapsed
	// (its heartbeats were overdue or refused), or whose work lost its
	// lease elsewhere (a ledger): it stops, and settles nothing.
	ErrLeaseLost = errors.New("personaq: attempt lease lost")
	// ErrInvalidConfig wraps every configuration error, naming the field. It
	// is schemas.ErrInvalidConfig, the same error in every personaq package:
	// errors.Is matches it whichever package returned it.
	ErrInvalidConfig = schemas.ErrInvalidConfig
	// ErrDuplicate is returned by Publisher.Publish for a message the
	// server did not store because one with its Nats-Msg-Id was stored
	// within the stream's duplicate window.
	ErrDuplicate = errors.New("duplicate message not stored")
)

// errSettled is the cancellation cause of a message's context once the
// message is settled.
var errSettled = errors.New("personaq: message settled")
