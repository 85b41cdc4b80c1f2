package api

import "github.com/personaq/personaq/schemas"

// ErrInvalidConfig wraps every configuration error, naming the field. It
// is schemas.ErrInvalidConfig, the same error in every personaq package:
// errors.Is matches it whichever package returned it.
var ErrInvalidConfig = schemas.ErrInvalidConfig
