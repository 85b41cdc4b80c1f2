package consumers

import "errors"

var (
	// ErrInvalidConfig wraps every configuration error, naming the field.
	ErrInvalidConfig = errors.New("invalid config")
	// ErrUnknownPersona is returned when a message names a persona with no
	// registered handler.
	ErrUnknownPersona = errors.New("unknown persona")
	// ErrNotRunning: the runtime's consumers are not bound (starting or stopped).
	ErrNotRunning = errors.New("consumers not bound")
)
