package flow

import (
	"errors"

	"github.com/personaq/personaq/schemas"
)

var (
	// ErrInvalidConfig is wrapped by NewLimiter and NewCircuits for a
	// configuration they cannot accept; the message names the field. It is
	// schemas.ErrInvalidConfig, the same error in every personaq package.
	ErrInvalidConfig = schemas.ErrInvalidConfig

	// ErrUnknownLimiter is returned for a limiter name the Limiter was not
	// configured with.
	ErrUnknownLimiter = errors.New("flow: unknown limiter")

	// ErrUnavailable wraps every failed Redis call: the caller does not pull
	// (a limiter that cannot be asked admits nothing).
	ErrUnavailable = errors.New("flow: redis unavailable")
)
