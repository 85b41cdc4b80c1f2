package handlers

import (
	"context"
	"encoding/json"
	"time"

	"github.com/personaq/personaq/retry"
	"github.com/personaq/personaq/schemas"
)

// Request is one attempt of a persona request, as a handler sees it.
// The context passed with it carries the attempt's deadline.
type Request struct {
	// Message is the decoded persona request.
	Message *schemas.PersonaRequest
	// Attempt is the 1-based number of this handler invocation.
	Attempt int
	// Role is primary on odd attempts and fallback on even ones (when the
	// request names a fallback agent).
	Role retry.Role
	// Agent is the agent chosen for this attempt.
	Agent string
	// Previous holds the earlier attempts of this task step, oldest first.
	Previous []retry.Attempt
	// Feedback lists the earlier attempts' errors, for the agent's prompt
	// (retry with feedback: the previous error fed back).
	Feedback []string
	// ProgressInterval is how often the persona is asked to report
	// progress during this attempt (adaptive retry's poll interval; doubled
	// after an attempt whose progress improved). Zero: not asked.
	ProgressInterval time.Duration
	// LeaseDeadline returns when the attempt's lease runs out unless
	// renewed (it moves with each renewal); past it another replica may
	// run the request again. Nil when the attempt has no lease. The
	// command invoker's supervisor kills the agent by then; the HTTP
	// invoker sends it in X-Personaq-Lease-Deadline.
	LeaseDeadline func() time.Time
}

// Result is what a handler returns with or without an error. Progress is
// read on failures too: it is how plateaus are detected. Output is kept on
// failures too (bounded), so the answer that was wrong can be shown to the
// next attempt. Usage is read on failures too: a failed attempt may have
// been paid for, and it counts toward the request's token and cost budget.
type Result struct {
	Progress retry.Progress
	Output   json.RawMessage

	// Usage is what the attempt consumed at its model provider (tokens,
	// cost); zero when the handler does not know. A Go handler sets it;
	// the built-in invokers read it from the persona's answer.
	Usage retry.Usage
}

// Handler runs one attempt of a persona request.
//
// The ack contract: a nil error acks the message; a classified error (see
// the package doc) decides retry, quarantine or snooze; a panic is
// recovered by the runtime and quarantined as terminal. A handler must
// return when ctx is done.
type Handler interface {
	Handle(ctx context.Context, req *Request) (Result, error)
}

// Func adapts a function to Handler.
type Func func(ctx context.Context, req *Request) (Result, error)

// Handle implements Handler.
func (f Func) Handle(ctx context.Context, req *Request) (Result, error) { return f(ctx, req) }
