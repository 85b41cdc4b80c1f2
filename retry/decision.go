package retry

import (
	"fmt"
	"time"

	"github.com/personaq/personaq/schemas"
)

// Action is what the runtime does with a message after an attempt.
type Action uint8

// Actions.
const (
	// ActionAck: the attempt succeeded; ack the message.
	ActionAck Action = iota
	// ActionRetry: redeliver after Decision.Delay to Decision.Role.
	ActionRetry
	// ActionQuarantine: stop, and keep the message with Decision.Reason.
	ActionQuarantine
	// ActionDefer: a plateau was confirmed; park the work (quarantine with
	// reason deferred) so automation moves on.
	ActionDefer
	// ActionEscalate: retries are exhausted in a way a person must look at.
	ActionEscalate
)

var actionNames = [...]string{"ack", "retry", "quarantine", "defer", "escalate"}

func (a Action) String() string {
	if int(a) < len(actionNames) {
		return actionNames[a]
	}
	return fmt.Sprintf("action(%d)", a)
}

// Decision is the outcome of Decide.
type Decision struct {
	Action Action
	// Reason is set for quarantine, defer and escalate.
	Reason schemas.Reason
	// Detail is an operator-readable sentence explaining the decision.
	Detail string
	// Delay before the next attempt (ActionRetry).
	Delay time.Duration
	// Warning is set when the policy's schedule returned an out-of-range
	// delay and a safe one was used instead (see safeDelay); log it.
	Warning string
	// NextAttempt is the number the next attempt will carry (ActionRetry);
	// a snooze keeps the current number.
	NextAttempt int
	// Role runs the next attempt (ActionRetry).
	Role Role
	// Timeout is the next attempt's timeout (ActionRetry); it may be
	// extended beyond the policy's AttemptTimeout (adaptive retry, variable
	// progress).
	Timeout time.Duration
	// ProgressInterval is how often the next attempt is asked to report
	// progress (ActionRetry): the policy's, doubled after an attempt whose
	// progress improved (ProgressIntervalFor).
	ProgressInterval time.Duration
	// Feedback holds the errors of earlier attempts for the next one (retry
	// with feedback).
	Feedback []string
	// RemainingRetries after this decision (for logs).
	RemainingRetries int
	// Plateau is the progress at which a plateau was confirmed (ActionDefer).
	Plateau *Progress
	// Counted is false when the attempt does not burn an attempt (snooze).
	Counted bool
	// Blocked is true when the step failed for good and its task is blocked:
	// retries exhausted, a terminal failure, an undecodable message.
	// Terminal records and events of such a request say the task is
	// blocked. A deferred task is parked (automation moves on to the next
	// one) and an escalated one is handed to a person; neither is blocked.
	Blocked bool
}
