package ledger

import (
	"errors"
	"fmt"

	"github.com/personaq/personaq/consumers/rdb"
	"github.com/personaq/personaq/schemas"
)

var (
	// ErrUnavailable wraps every error that means Redis could not be reached
	// or could not serve the call right now: connection refused or reset,
	// dial/read/write timeouts, a closed client, pool timeouts, and the
	// transient server replies LOADING, READONLY, MASTERDOWN, CLUSTERDOWN,
	// TRYAGAIN, NOREPLICAS, BUSY and "max number of clients". The runtime
	// releases the message without counting an attempt and reports itself
	// not ready.
	// It wraps rdb.ErrUnavailable, as flow.ErrUnavailable does.
	ErrUnavailable = fmt.Errorf("ledger: %w", rdb.ErrUnavailable)

	// ErrCorrupt means data stored under the ledger's keys could not be
	// decoded (an unknown class, malformed JSON, a key of the wrong type).
	ErrCorrupt = errors.New("ledger: corrupt data")

	// ErrInvalidConfig is wrapped by New for a Config it cannot accept. It
	// is schemas.ErrInvalidConfig, the same error in every personaq package.
	ErrInvalidConfig = schemas.ErrInvalidConfig

	// ErrLeaseLost is returned by a fenced Finish and by Renew when the
	// attempt's lease expired or another attempt holds it: the caller is a
	// stale holder and must settle nothing. Nothing was written.
	ErrLeaseLost = errors.New("ledger: attempt lease lost")

	// ErrInvalidArgument is wrapped when a call's arguments are unusable: an
	// empty task id or an attempt number below 1.
	ErrInvalidArgument = errors.New("ledger: invalid argument")
)

// redisErrors are the sentinels rdb translates the ledger's Redis errors
// into.
var redisErrors = rdb.Errors{Store: "ledger", Unavailable: ErrUnavailable, WrongType: ErrCorrupt}

// wrap translates an error of one Redis call into the package's errors,
// naming the operation (rdb.Errors.Wrap).
func (l *Ledger) wrap(op string, err error) error {
	return redisErrors.Wrap(l.cfg.Client, op, err)
}
