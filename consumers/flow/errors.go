package flow

import (
	"errors"
	"fmt"

	"github.com/personaq/personaq/consumers/rdb"
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

	// ErrUnavailable is wrapped when Redis could not be reached or serve
	// the call (rdb's one classification; it wraps rdb.ErrUnavailable, as
	// ledger.ErrUnavailable does). Any failed call leaves the caller not
	// pulling: a limiter that cannot be asked admits nothing.
	ErrUnavailable = fmt.Errorf("flow: %w", rdb.ErrUnavailable)
)

// redisErrors are the sentinels rdb translates the flow stores' Redis
// errors into.
var redisErrors = rdb.Errors{Store: "flow", Unavailable: ErrUnavailable}
