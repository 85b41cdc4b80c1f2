package handlers

import "errors"

// ErrCancelled is the cause (context.Cause) of an attempt's context when its
// request was cancelled: the handler should stop and return. Whatever it
// returns then, the attempt is recorded as cancelled, not as a failure.
var ErrCancelled = errors.New("request cancelled")
