package retry

import "fmt"

// Class is how an attempt ended, as classified by the handlers package.
type Class uint8

// Outcome classes. The zero value is ClassSucceeded so a missing class never
// reads as a failure class by accident; callers always set it explicitly.
const (
	// ClassSucceeded: the handler returned no error.
	ClassSucceeded Class = iota
	// ClassRetryable: a transient failure; retried on the policy's schedule.
	ClassRetryable
	// ClassTimeout: the attempt ran past its timeout; retried on the schedule.
	ClassTimeout
	// ClassNetwork: the agent could not be reached; retried after the
	// policy's NetworkDelay and never counted toward plateau detection.
	ClassNetwork
	// ClassValidation: the agent answered but the answer was invalid; retried
	// after ValidationDelay (none by default) with the error fed back.
	ClassValidation
	// ClassTerminal: retrying cannot help; quarantined at once.
	ClassTerminal
	// ClassSnooze: "try again later" that does not burn an attempt.
	ClassSnooze
	// ClassInvalidMessage: the message itself could not be decoded.
	ClassInvalidMessage
)

var classNames = [...]string{
	ClassSucceeded:      "succeeded",
	ClassRetryable:      "retryable",
	ClassTimeout:        "timeout",
	ClassNetwork:        "network",
	ClassValidation:     "validation",
	ClassTerminal:       "terminal",
	ClassSnooze:         "snooze",
	ClassInvalidMessage: "invalid_message",
}

// String returns the class name used in logs, ledgers and records.
func (c Class) String() string {
	if int(c) < len(classNames) {
		return classNames[c]
	}
	return fmt.Sprintf("class(%d)", c)
}

// ParseClass is the inverse of String.
func ParseClass(s string) (Class, error) {
	for c, name := range classNames {
		if name == s {
			return Class(c), nil
		}
	}
	return 0, fmt.Errorf("%w: unknown class %q", ErrInvalidPolicy, s)
}

// Failed reports whether the class is a failed attempt.
func (c Class) Failed() bool { return c != ClassSucceeded && c != ClassSnooze }

// countsTowardPlateau reports whether an attempt of this class may take part
// in plateau detection: network failures never do (adaptive retry).
func (c Class) countsTowardPlateau() bool {
	return c.Failed() && c != ClassNetwork
}
