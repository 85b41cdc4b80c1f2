package client

import (
	"errors"
	"fmt"

	"github.com/personaq/personaq/consumers/wire"
	"github.com/personaq/personaq/schemas"
)

var (
	// ErrBlocked: the request was quarantined — retries exhausted, a
	// terminal failure, or an invalid message. The task step cannot go on
	// until someone acts (replays or fixes it).
	ErrBlocked = errors.New("task blocked")
	// ErrDeferred: the persona plateaued at the same point across agents
	// (adaptive retry); the step can be revisited later.
	ErrDeferred = errors.New("task deferred")
	// ErrEscalated: retries ran out without a plateau (no progress at all,
	// or variable progress); someone should look.
	ErrEscalated = errors.New("task escalated")
	// ErrStepDeadline: the step budget ran out before the request ended.
	ErrStepDeadline = errors.New("step deadline exceeded")
	// ErrBudgetExhausted: another attempt would have overspent the
	// request's token or cost budget. The request was quarantined, so the
	// error matches ErrBlocked too.
	ErrBudgetExhausted = errors.New("token or cost budget exhausted")
	// ErrCancelled: the request was cancelled (Cancel, CancelTask, the
	// API, the CLI); the record says why (Detail) and who asked
	// (CancelledBy). It is also the cause a cancelled attempt's context
	// carries.
	ErrCancelled = wire.ErrCancelled
	// ErrQueueWait: the request did not start within its queue wait
	// (policy queue_wait, or policy_overrides.queue_wait_ms); it never
	// ran. Its record's outcome is deadline_exceeded, so the error also
	// matches ErrStepDeadline.
	ErrQueueWait = errors.New("not started within its queue wait")
	// ErrAlreadyEnded: a cancel came after the request had ended another
	// way; that record stands.
	ErrAlreadyEnded = wire.ErrAlreadyEnded
	// ErrUnknownRequest: no open request and no terminal record has the id.
	ErrUnknownRequest = wire.ErrUnknownRequest
	// ErrUnknownPersona: no replica serves the persona (see SkipPersonaCheck).
	ErrUnknownPersona = wire.ErrUnknownPersona
	// ErrConflict: the request id was already submitted with other
	// content; the error is a *ConflictError saying what is stored.
	ErrConflict = wire.ErrConflict
	// ErrInvalidConfig wraps every configuration error, naming the field. It
	// is schemas.ErrInvalidConfig, the same error in every personaq package:
	// errors.Is matches it whichever package returned it.
	ErrInvalidConfig = schemas.ErrInvalidConfig
)

// ConflictError is a submit refused because its request id was already
// used for other content (see schemas.RequestDigest): it carries the stored
// digest and what was found of the first request (its queued event,
// terminal record or stored message).
type ConflictError = wire.ConflictError

// StoppedError is a request that ended without succeeding: Record is its
// terminal record (reason, quarantine sequence, attempts, last error, usage).
// It matches ErrBlocked, ErrDeferred, ErrEscalated, ErrStepDeadline or
// ErrCancelled, and ErrBudgetExhausted besides ErrBlocked when the budget
// ended it.
type StoppedError struct {
	Record *schemas.OutcomeEvent
}

func (e *StoppedError) Error() string {
	r := e.Record
	msg := fmt.Sprintf("task %s step %s %s: %s after %d attempt(s)", r.TaskID, r.Step, e.kind(), r.Reason, r.Attempts)
	if r.QuarantineSeq != 0 {
		msg += fmt.Sprintf(" (quarantine seq %d)", r.QuarantineSeq)
	}
	if r.LastError != "" {
		msg += ": " + r.LastError
	} else if r.Detail != "" {
		msg += ": " + r.Detail
	}
	return msg
}

func (e *StoppedError) kind() string {
	switch e.Record.Outcome {
	case schemas.OutcomeDeferred:
		return "deferred"
	case schemas.OutcomeEscalated:
		return "escalated"
	case schemas.OutcomeDeadlineExceeded:
		return "past its step deadline"
	case schemas.OutcomeCancelled:
		return "cancelled"
	}
	return "blocked"
}

// Is matches the sentinel of the record's outcome (and of its reason).
func (e *StoppedError) Is(target error) bool {
	if target == ErrBudgetExhausted {
		return e.Record.Reason == schemas.ReasonBudgetExhausted
	}
	if target == ErrQueueWait {
		return e.Record.Reason == schemas.ReasonQueueWaitExceeded
	}
	switch e.Record.Outcome {
	case schemas.OutcomeDeferred:
		return target == ErrDeferred
	case schemas.OutcomeEscalated:
		return target == ErrEscalated
	case schemas.OutcomeDeadlineExceeded:
		return target == ErrStepDeadline
	case schemas.OutcomeCancelled:
		return target == ErrCancelled
	}
	return target == ErrBlocked
}
