package saga

import (
	"errors"

	"github.com/personaq/personaq/schemas"
)

var (
	// ErrInvalidConfig wraps every configuration error, naming the field. It
	// is schemas.ErrInvalidConfig, the same error in every personaq package:
	// errors.Is matches it whichever package returned it.
	ErrInvalidConfig = schemas.ErrInvalidConfig
	// ErrNotFound is returned for an unknown saga id.
	ErrNotFound = errors.New("saga not found")
	// ErrNotProvisioned is returned when the saga bucket does not exist
	// (nothing was ever published).
	ErrNotProvisioned = errors.New("saga bucket missing")
	// ErrNoHandler is the error of a saga whose compensation kind has no
	// registered handler; the saga is quarantined, never left running.
	ErrNoHandler = errors.New("no compensation handler registered")
)
