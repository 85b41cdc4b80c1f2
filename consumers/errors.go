package consumers

import (
	"errors"

	"github.com/personaq/personaq/consumers/wire"
	"github.com/personaq/personaq/schemas"
)

var (
	// ErrInvalidConfig wraps every configuration error, naming the field. It
	// is schemas.ErrInvalidConfig, the same error in every personaq package:
	// errors.Is matches it whichever package returned it.
	ErrInvalidConfig = schemas.ErrInvalidConfig
	// ErrUnknownPersona is returned when a message names a persona with no
	// registered handler.
	ErrUnknownPersona = wire.ErrUnknownPersona
	// ErrNotRunning: the runtime's consumers are not bound (starting or stopped).
	ErrNotRunning = errors.New("consumers not bound")
)
