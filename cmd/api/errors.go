package api

import "errors"

// ErrInvalidConfig wraps configuration errors, naming the field.
var ErrInvalidConfig = errors.New("invalid api config")
