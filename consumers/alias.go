package consumers

import (
	"github.com/personaq/personaq/consumers/wire"
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

// The caller's side of personaq (stream names, submit, terminal records,
// cancel) lives in package wire, which a client imports without the
// runtime. The runtime is configured with the same types and speaks the
// same names, errors and publishes; each is the wire one, not a copy.
type (
	// Topology names the streams and subjects (wire.Topology).
	Topology = wire.Topology
	// OutputTopology names and bounds the live output stream
	// (wire.OutputTopology).
	OutputTopology = wire.OutputTopology
)

var (
	// Durable is a persona's durable consumer name (wire.Durable).
	Durable = wire.Durable
	// ErrCancelled is a cancelled attempt's context cause (wire.ErrCancelled).
	ErrCancelled = wire.ErrCancelled
	// ErrNoOutcome: no terminal record (wire.ErrNoOutcome).
	ErrNoOutcome = wire.ErrNoOutcome
	// PublishRequest publishes a request (wire.PublishRequest).
	PublishRequest = wire.PublishRequest
	// WithDeadline sets a request's step deadline (wire.WithDeadline).
	WithDeadline = wire.WithDeadline
)
