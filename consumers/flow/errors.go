package flow

import "errors"

var (
	// ErrInvalidConfig is wrapped by NewLimiter and NewCircuits for a
	// configuration they cannot accept; the message names the field.
	ErrInvalidConfig = errors.New("invalid config")

	// ErrUnknownLimiter is returned for a limiter name the Limiter was not
	// configured with.
	ErrUnknownLimiter = errors.New("flow: unknown limiter")

	// ErrUnavailable wraps every failed Redis call: the caller does not pull
	// (a limiter that cannot be asked admits nothing).
	ErrUnavailable = errors.New("flow: redis unavailable")
)
