package console

import (
	"fmt"
	"time"

	"github.com/personaq/personaq/schemas"
)

// liveEvent is one outcome or attempt event as the live page shows it. ID
// counts events in the order the console received them.
type liveEvent struct {
	ID        uint64    `json:"id"`
	Kind      string    `json:"kind"` // "outcome" or "attempt"
	At        time.Time `json:"at"`
	Clock     string    `json:"clock"`
	Persona   string    `json:"persona"`
	RequestID string    `json:"request_id"`
	TaskID    string    `json:"task_id"`
	Step      string    `json:"step"`
	// What: "succeeded", "quarantined (terminal)", "attempt 2 started", …
	What string `json:"what"`
	// Tone is the CSS class: ok, bad, warn or info.
	Tone   string `json:"tone"`
	Detail string `json:"detail,omitempty"`
	// retry is set for a failed attempt that will be retried.
	retry bool
	// stopped is set for a terminal record other than succeeded.
	stopped bool
}

// maxDetail bounds the error text an event carries (never a payload).
const maxDetail = 200

func outcomeEvent(ev *schemas.OutcomeEvent) liveEvent {
	e := liveEvent{Kind: "outcome", At: ev.At, Persona: ev.Persona, RequestID: ev.RequestID, TaskID: ev.TaskID,
		Step: ev.Step, What: string(ev.Outcome), Tone: "ok"}
	if ev.Outcome != schemas.OutcomeSucceeded {
		e.Tone, e.stopped = "bad", true
		if ev.Reason != "" {
			e.What += " (" + string(ev.Reason) + ")"
		}
		e.Detail = trunc(ev.LastError, maxDetail)
	}
	e.Detail = fmt.Sprintf("after %d attempt(s)", ev.Attempts) + sep(e.Detail)
	return e
}

func attemptEvent(ev *schemas.AttemptEvent) liveEvent {
	e := liveEvent{Kind: "attempt", At: ev.At, Persona: ev.Persona, RequestID: ev.RequestID, TaskID: ev.TaskID,
		Step: ev.Step, Tone: "info"}
	switch ev.Kind {
	case schemas.AttemptStarted:
		e.What = fmt.Sprintf("attempt %d/%d started", ev.Attempt, ev.MaxAttempts)
		if ev.Agent != "" {
			e.Detail = "agent " + ev.Agent
		}
	case schemas.AttemptWaiting:
		e.What, e.Tone, e.Detail = "waiting: "+ev.WaitingFor, "warn", trunc(ev.Error, maxDetail)
		if ev.WaitingFor == schemas.WaitingForLedger {
			e.What = "waiting: attempt ledger unavailable"
		}
	default:
		e.What, e.Tone = fmt.Sprintf("attempt %d failed (%s)", ev.Attempt, ev.Class), "warn"
		if ev.NextAttempt > 0 {
			e.retry = true
			e.Detail = fmt.Sprintf("retry %d in %s", ev.NextAttempt, time.Duration(ev.NextDelayMs)*time.Millisecond)
			if ev.NextAgent != "" {
				e.Detail += " with " + ev.NextAgent
			}
		}
		if msg := trunc(ev.Error, maxDetail); e.Detail == "" {
			e.Detail = msg
		} else {
			e.Detail += sep(msg)
		}
	}
	return e
}

func sep(s string) string {
	if s == "" {
		return ""
	}
	return ": " + s
}
