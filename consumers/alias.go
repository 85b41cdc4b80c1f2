package consumers

import (
	"github.com/personaq/personaq/handlers"
	"github.com/personaq/personaq/retry"
)

// The types a persona handler is written with, so the common case — a
// runtime with Go handlers — needs this package alone. Each is the same
// type as in its own package (handlers, retry), not a copy.
type (
	// Handler runs one attempt of a persona request (handlers.Handler).
	Handler = handlers.Handler
	// HandlerFunc adapts a function to Handler (handlers.Func).
	HandlerFunc = handlers.Func
	// Request is one attempt as a handler sees it (handlers.Request).
	Request = handlers.Request
	// Result is what a handler returns (handlers.Result).
	Result = handlers.Result
	// Usage is what an attempt consumed at its provider (retry.Usage).
	Usage = retry.Usage
	// Progress is a handler's tasks completed of total (retry.Progress).
	Progress = retry.Progress
	// Policy is a persona's retry policy (retry.Policy).
	Policy = retry.Policy
)
