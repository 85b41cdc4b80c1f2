package console

import "errors"

var (
	// ErrInvalidConfig wraps every configuration error, naming the field.
	ErrInvalidConfig = errors.New("invalid console config")
	// errForbidden: a mutation without a valid token or CSRF token.
	errForbidden = errors.New("forbidden")
	// errReadOnly: a mutation on a read-only console.
	errReadOnly = errors.New("the console is read-only")
	// errNoLedger: the task page needs the attempt ledger.
	errNoLedger = errors.New("no attempt ledger configured (start the console with --redis-url)")
)
