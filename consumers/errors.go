package consumers

import "errors"

var (
	// ErrShuttingDown is the cancellation cause of attempts cut short by a
	// graceful shutdown: they are released to another replica without
	// counting an attempt.
	ErrShuttingDown = errors.New("personaq: shutting down")
	// ErrInvalidConfig wraps every configuration error, naming the field.
	ErrInvalidConfig = errors.New("invalid config")
	// ErrUnknownPersona is returned when a message names a persona with no
	// registered handler.
	ErrUnknownPersona = errors.New("unknown persona")
	// ErrNotRunning: the runtime's consumers are not bound (starting or stopped).
	ErrNotRunning = errors.New("consumers not bound")
	// ErrLeaseLost is the cancellation cause of an attempt whose lease
	// lapsed (its heartbeats or lease renewals were overdue or refused): it
	// stops, and its delivery settles nothing.
	ErrLeaseLost = errors.New("personaq: attempt lease lost")
	// ErrDuplicate is returned by Publisher.Publish for a message the
	// server did not store because one with its Nats-Msg-Id was stored
	// within the stream's duplicate window.
	ErrDuplicate = errors.New("duplicate message not stored")
	// ErrClosed is returned by Subscribe after Close.
	ErrClosed = errors.New("subscriber closed")
)

// errSettled is the cancellation cause of a message's context once the
// message is settled.
var errSettled = errors.New("personaq: message settled")
