package retry

import (
	"fmt"
	"strings"

	"github.com/personaq/personaq/schemas"
)

// Log messages for how an attempt ended, shared by every runtime that logs
// decisions so operators can grep one wording.
const (
	MsgSucceeded = "Persona request succeeded"
	// MsgTimedOut is the step budget's line for an attempt that ran out of
	// time and will be retried.
	MsgTimedOut = "Persona request timed out, will retry"
	MsgSnoozed  = "Persona request snoozed; attempt not counted"
)

// retryTag is retry with feedback's tag for a failed attempt: "[RETRY n]",
// n being the 1-based number of the attempt that failed (the first failure
// is [RETRY 1]).
func retryTag(n int) string { return fmt.Sprintf("[RETRY %d]", n) }

// FailureMessage is retry with feedback's line for a failed attempt:
// "[RETRY n] Validation: {error}" for an invalid answer (its feedback when
// it has some) and "[RETRY n] API error: {error}" for every other failure.
func FailureMessage(a Attempt) string {
	if a.Class == ClassValidation {
		msg := a.Feedback
		if msg == "" {
			msg = a.Error
		}
		return fmt.Sprintf("%s Validation: %s", retryTag(a.Number), strings.TrimSpace(msg))
	}
	return fmt.Sprintf("%s API error: %s", retryTag(a.Number), strings.TrimSpace(a.Error))
}

// DeferMessage is adaptive retry's line for a deferred task step: "Task
// {task} step {step} deferred - {persona} hit complexity limit at
// {tasks_completed}/{tasks_total}".
func DeferMessage(task, step, persona string, p Progress) string {
	return fmt.Sprintf("Task %s step %s deferred - %s hit complexity limit at %d/%d",
		task, step, persona, p.Completed, p.Total)
}

// Message is the log message for attempt a of a task step ending with
// decision d:
//   - ack: MsgSucceeded;
//   - a retry: MsgTimedOut after a timeout, MsgSnoozed after a snooze,
//     FailureMessage otherwise;
//   - a deferral: DeferMessage;
//   - any other stop: FailureMessage (the final failure is tagged too)
//     followed by what became of the task, e.g. "[RETRY 4] API error: …
//   - all retries exhausted; task blocked".
func Message(a Attempt, d Decision, task, step, persona string) string {
	switch d.Action {
	case ActionAck:
		return MsgSucceeded
	case ActionRetry:
		switch {
		case !d.Counted:
			return MsgSnoozed
		case a.Class == ClassTimeout:
			return MsgTimedOut
		}
		return FailureMessage(a)
	case ActionDefer:
		var p Progress
		if d.Plateau != nil {
			p = *d.Plateau
		}
		return DeferMessage(task, step, persona, p)
	}
	if a.Class == ClassInvalidMessage {
		return "Persona request quarantined: the message could not be decoded; task blocked"
	}
	return FailureMessage(a) + " - " + stopPhrase(d)
}

func stopPhrase(d Decision) string {
	switch d.Reason {
	case schemas.ReasonExhausted:
		return "all retries exhausted; task blocked"
	case schemas.ReasonEscalated:
		return "all retries exhausted; task escalated"
	case schemas.ReasonTerminal:
		return "not retryable; task blocked"
	case schemas.ReasonBudgetExhausted:
		return "token or cost budget exhausted; task blocked"
	}
	return "task blocked"
}
