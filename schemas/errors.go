package schemas

import "errors"

// Sentinel errors. Match them with errors.Is; the text around them is for
// people, not for code.
var (
	// ErrInvalid means the input is not JSON, not an object, breaks its
	// schema or does not fit the Go type. Every *FieldError wraps it.
	ErrInvalid = errors.New("invalid message")
	// ErrUnknownVersion means schema_version is an integer other than
	// Version. It is kept apart from ErrInvalid so a caller can tell a
	// message from a newer producer from a broken one.
	ErrUnknownVersion = errors.New("unknown schema version")
	// ErrTooLarge means the input is longer than MaxPayloadBytes.
	ErrTooLarge = errors.New("message too large")
	// ErrInvalidConfig is the one configuration error of personaq: every
	// constructor that refuses its config (dlq, handlers, consumers and
	// their saga, flow, ledger, transport, client, console and metrics
	// packages, the HTTP API) and the config file loader wrap it, naming
	// the field, and each of those packages re-exports it under its own
	// name (ErrInvalidConfig; config.ErrInvalid). It lives here
	// because schemas imports no other personaq package, so every one of
	// them can import it without a cycle.
	ErrInvalidConfig = errors.New("invalid config")
)

// FieldError names the field that made a message invalid. It wraps
// ErrInvalid, and is the only error type callers need to know: errors from
// the JSON Schema library are translated into it at the package edge.
type FieldError struct {
	// Field is the dotted path of the offending value ("persona",
	// "agents.primary", "errors.0.class"); empty for the message as a
	// whole. Array elements are named by index where it is known.
	Field string
	// Problem says what is wrong, e.g. "is required".
	Problem string
}

func (e *FieldError) Error() string {
	if e.Field == "" {
		return ErrInvalid.Error() + ": " + e.Problem
	}
	return ErrInvalid.Error() + ": " + e.Field + ": " + e.Problem
}

// Unwrap returns ErrInvalid.
func (e *FieldError) Unwrap() error { return ErrInvalid }
