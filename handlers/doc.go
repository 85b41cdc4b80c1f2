// Package handlers holds the persona handler contract and personaq's error
// classes.
//
// A Handler runs one attempt of one persona request. Its error says what
// should happen next, and the runtime acts on it:
//
//	nil                → the request succeeded; the message is acked.
//	Retryable(err)     → retried on the policy's schedule.
//	After(d, err)      → retried after d (e.g. a provider's Retry-After).
//	Timeout(err)       → retried on the schedule; also what an attempt
//	                     that overran its deadline becomes.
//	Network(err)       → retried after the policy's network delay (60s),
//	                     never counted toward plateau detection.
//	Validation(fb, err)→ retried at once; fb is shown to the next attempt.
//	Terminal(err)      → quarantined at once, never retried.
//	Snooze(d)          → tried again after d without burning an attempt.
//	a panic            → recovered and treated as Terminal.
//
// Errors that carry no class are classified by Classify: context deadline →
// timeout, connection refused/reset and DNS failures → network, anything
// else → retryable. The outermost error's type name (the Go type's simple
// name, or an ErrorType() method; fmt's wrappers and this package's classes
// are looked through) is matched against a policy's non-retryable list,
// exactly and alone, like Temporal's non_retryable_error_types: a listed
// type further down the chain does not count.
//
// Built-in invokers put personaq in front of agents without Go: NewHTTP
// POSTs each attempt to an endpoint (status codes map onto the classes,
// Retry-After is honoured, a JSON body may name its error type) and
// NewCommand runs an agent CLI with the request on stdin (exit codes map
// onto the classes, a JSON line may name the error type; the whole process
// group is killed at the deadline). Both keep what the persona answered on
// failed attempts too, bounded by their size limit (1 MiB unless
// configured). DemoPersonas are the handlers `personaq dev` runs.
package handlers
