package advisory

import (
	"errors"

	"github.com/personaq/personaq/schemas"
)

var (
	// ErrInvalidConfig wraps every configuration error, naming the field. It
	// is schemas.ErrInvalidConfig, the same error in every personaq package:
	// errors.Is matches it whichever package returned it.
	ErrInvalidConfig = schemas.ErrInvalidConfig
	// ErrCaptureFailed wraps the failed captures of a max-deliveries sweep:
	// the sweep went on past each one and names them all.
	ErrCaptureFailed = errors.New("crash-looping message not captured")
)
