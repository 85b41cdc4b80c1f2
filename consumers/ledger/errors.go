package ledger

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/redis/go-redis/v9"

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
	ErrUnavailable = errors.New("ledger: redis unavailable")

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

// transientReplies are server error prefixes that mean "not now" rather
// than "this call is wrong".
var transientReplies = []string{
	"LOADING ", "READONLY ", "MASTERDOWN ", "CLUSTERDOWN ", "TRYAGAIN ",
	"NOREPLICAS ", "BUSY ", "ERR max number of clients",
}

// wrap translates an error of one Redis call into the package's errors,
// naming the operation. It keeps the original in the chain for messages.
// wrap translates err for the caller. When a Cluster client could not
// reach a node it also asks go-redis to reload the slot map: go-redis
// otherwise keeps sending a dead master's slots to it until its periodic
// reload (60s by default), long after a replica took over.
func (l *Ledger) wrap(op string, err error) error {
	err = wrap(op, err)
	if cc, ok := l.cfg.Client.(*redis.ClusterClient); ok && errors.Is(err, ErrUnavailable) {
		cc.ReloadState(context.Background())
	}
	return err
}

func wrap(op string, err error) error {
	if err == nil {
		return nil
	}
	switch {
	case errors.Is(err, context.Canceled):
		// The caller gave up (shutdown): not a statement about Redis.
		return fmt.Errorf("ledger: %s: %w", op, err)
	case unavailable(err):
		return fmt.Errorf("%w: %s: %w", ErrUnavailable, op, err)
	case strings.Contains(err.Error(), "WRONGTYPE "):
		// A ledger key holds another type; inside a script the reply reads
		// "ERR Error running script …: WRONGTYPE …" on some servers.
		return fmt.Errorf("%w: %s: %w", ErrCorrupt, op, err)
	}
	return fmt.Errorf("ledger: %s: %w", op, err)
}

func unavailable(err error) bool {
	var rerr redis.Error
	if !errors.As(err, &rerr) {
		// Not a server reply: network, timeout, closed client, pool, EOF.
		return true
	}
	msg := rerr.Error()
	for _, p := range transientReplies {
		if strings.HasPrefix(msg, p) {
			return true
		}
	}
	return false
}
