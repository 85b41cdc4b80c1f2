package cli

import (
	"github.com/personaq/personaq/schemas"
)

// waitingLine is what `publish --wait` prints for a request held before
// its attempt: "waiting: attempt ledger unavailable (…)".
func waitingLine(ev *schemas.AttemptEvent) string {
	what := ev.WaitingFor
	if what == schemas.WaitingForLedger {
		what = "attempt ledger unavailable"
	}
	line := "waiting: " + what
	if ev.Error != "" {
		line += " (" + truncate(ev.Error, 200) + ")"
	}
	if ev.WaitingFor == schemas.WaitingForLedger {
		line += "; the request starts when it is back, no attempt counted"
	}
	return line
}
