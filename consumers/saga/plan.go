package saga

import (
	"errors"
	"fmt"
	"strings"

	"github.com/personaq/personaq/retry"
	"github.com/personaq/personaq/schemas"
)

// arrival is what a delivery of a compensation request does before any
// handler runs.
type arrival int

const (
	// arriveRun: the saga is RUNNING with this compensation; run an attempt.
	arriveRun arrival = iota
	// arriveSettle: the saga is terminal; settle the message without running.
	arriveSettle
	// arriveFinish: the saga is QUARANTINED but its record is not written
	// yet; write it, then settle.
	arriveFinish
	// arriveReopen: an operator's replay of a QUARANTINED saga (a new
	// request id); reopen it as RUNNING, then run.
	arriveReopen
	// arriveReject: a second, different compensation for a RUNNING saga; a
	// saga carries one, so the message is quarantined as invalid.
	arriveReject
)

// onArrival decides what a delivery of req does to saga sg.
func onArrival(sg *Saga, req *schemas.CompensationRequest, replay bool) arrival {
	switch {
	case sg.State == Running && (sg.Kind != req.Kind || sg.Target != req.Target):
		return arriveReject
	case sg.State == Running:
		return arriveRun
	case sg.State == Quarantined && sg.QuarantineSeq == 0:
		return arriveFinish
	case sg.State == Quarantined && replay && (sg.Request == nil || sg.Request.RequestID != req.RequestID):
		return arriveReopen
	}
	return arriveSettle
}

// attemptNumber is the number of the attempt a delivery runs: the saga's
// recorded attempts + 1, never below the deliveries JetStream counted that
// were not handed back on purpose, since a delivery that vanished (a crash
// mid-attempt) may have run the handler.
func attemptNumber(sg *Saga, delivered uint64) int {
	return max(sg.Attempts+1, int(delivered)-sg.Released)
}

// decide is the retry policy's decision after the failed attempt cur,
// on the saga's recorded history.
func decide(p retry.Policy, sg *Saga, cur retry.Attempt) retry.Decision {
	hist := make([]retry.Attempt, 0, len(sg.Errors))
	for _, r := range sg.Errors {
		hist = append(hist, retry.AttemptFromRecord(r))
	}
	return retry.Decide(retry.Input{Policy: p, History: hist, Current: cur})
}

// terminalReason explains a QUARANTINED saga to a person: the kind and
// target, and what failed.
func terminalReason(sg *Saga, err error, attempts int) string {
	if errors.Is(err, ErrNoHandler) {
		return fmt.Sprintf("no compensation handler registered for %s %s: parked for a person", sg.Kind, sg.Target)
	}
	r := fmt.Sprintf("%s failed for %s %s: %v", kindPhrase(sg.Kind), sg.Kind, sg.Target, err)
	if attempts > 1 {
		r += fmt.Sprintf(" (after %d attempts)", attempts)
	}
	return r
}

// errVanished is the failure of attempts whose deliveries ended without an
// outcome.
var errVanished = errors.New("attempts spent: earlier deliveries ended without an outcome (the process running them stopped mid-attempt)")

// kindPhrase names what a kind's failure is, for terminal reasons.
func kindPhrase(kind schemas.CompensationKind) string {
	switch kind {
	case schemas.CompensationDeleteBranch:
		return "branch deletion"
	case schemas.CompensationRemoveWorktree:
		return "worktree removal"
	}
	return strings.ToLower(strings.ReplaceAll(string(kind), "_", " ")) + " compensation"
}
