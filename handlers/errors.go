package handlers

import (
	"errors"
	"fmt"
	"time"

	"github.com/personaq/personaq/retry"
)

// ErrPanic wraps a recovered handler panic; it is terminal.
var ErrPanic = errors.New("handler panicked")

// Error is a classified handler error. Build one with the constructors
// (Terminal, Retryable, After, Network, Validation, Timeout, Snooze) and
// inspect one with errors.As or Classify.
type Error struct {
	Class retry.Class
	Err   error
	// RetryAfter asks for a specific delay before the next attempt.
	RetryAfter time.Duration
	// Feedback is shown to the next attempt (validation failures).
	Feedback string
}

func (e *Error) Error() string {
	if e.Err == nil {
		return e.Class.String()
	}
	return e.Err.Error()
}

// Unwrap returns the wrapped error.
func (e *Error) Unwrap() error { return e.Err }

func classed(c retry.Class, err error) *Error {
	if err == nil {
		err = errors.New(c.String())
	}
	return &Error{Class: c, Err: err}
}

// Terminal marks err as not worth retrying: the request is quarantined.
func Terminal(err error) error { return classed(retry.ClassTerminal, err) }

// Retryable marks err as transient: retried on the policy's schedule.
func Retryable(err error) error { return classed(retry.ClassRetryable, err) }

// After marks err as transient and asks for the next attempt after d.
func After(d time.Duration, err error) error {
	e := classed(retry.ClassRetryable, err)
	e.RetryAfter = d
	return e
}

// Network marks err as a failure to reach the agent.
func Network(err error) error { return classed(retry.ClassNetwork, err) }

// Timeout marks err as the attempt running out of time.
func Timeout(err error) error { return classed(retry.ClassTimeout, err) }

// Validation marks err as an invalid answer; feedback is handed to the next
// attempt so the agent can correct itself. Empty feedback uses err's text.
func Validation(feedback string, err error) error {
	e := classed(retry.ClassValidation, err)
	e.Feedback = feedback
	if feedback == "" {
		e.Feedback = e.Error()
	}
	return e
}

// Snooze asks for the request to be tried again after d without counting
// this attempt (River's JobSnooze).
func Snooze(d time.Duration) error {
	e := classed(retry.ClassSnooze, fmt.Errorf("snoozed for %s", d))
	e.RetryAfter = d
	return e
}
