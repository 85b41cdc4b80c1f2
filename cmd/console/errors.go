package console

import (
	"errors"

	"github.com/personaq/personaq/schemas"
)

var (
	// ErrInvalidConfig wraps every configuration error, naming the field. It
	// is schemas.ErrInvalidConfig, the same error in every personaq package:
	// errors.Is matches it whichever package returned it.
	ErrInvalidConfig = schemas.ErrInvalidConfig
	// errForbidden: a mutation without a valid token or CSRF token.
	errForbidden = errors.New("forbidden")
	// errReadOnly: a mutation on a read-only console.
	errReadOnly = errors.New("the console is read-only")
	// errNoLedger: the task page needs the attempt ledger.
	errNoLedger = errors.New("no attempt ledger configured (start the console with --redis-url)")
)
