package saga

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/personaq/personaq/retry"
	"github.com/personaq/personaq/schemas"
)

func TestOnArrival(t *testing.T) {
	t.Parallel()
	req := &schemas.CompensationRequest{RequestID: "r1", SagaID: "s", Kind: schemas.CompensationDeleteBranch, Target: "loop/1"}
	replayed := &schemas.CompensationRequest{RequestID: "r1-r1", SagaID: "s", Kind: req.Kind, Target: req.Target}
	saga := func(st State, qseq uint64) *Saga {
		return &Saga{ID: "s", State: st, Kind: req.Kind, Target: req.Target, Request: req, QuarantineSeq: qseq}
	}
	cases := map[string]struct {
		sg     *Saga
		req    *schemas.CompensationRequest
		replay bool
		want   arrival
	}{
		"RunningRuns":                    {saga(Running, 0), req, false, arriveRun},
		"RunningOtherRequestSameWork":    {saga(Running, 0), replayed, false, arriveRun},
		"RunningOtherTargetRejected":     {saga(Running, 0), &schemas.CompensationRequest{RequestID: "r2", Kind: req.Kind, Target: "loop/2"}, false, arriveReject},
		"RunningOtherKindRejected":       {saga(Running, 0), &schemas.CompensationRequest{RequestID: "r2", Kind: "RELEASE_LOCK", Target: req.Target}, false, arriveReject},
		"CompensatedSettles":             {saga(Compensated, 0), req, false, arriveSettle},
		"CompensatedReplaySettles":       {saga(Compensated, 0), replayed, true, arriveSettle},
		"QuarantinedSettles":             {saga(Quarantined, 7), req, false, arriveSettle},
		"QuarantinedSameRequestSettles":  {saga(Quarantined, 7), req, true, arriveSettle},
		"QuarantinedReplayReopens":       {saga(Quarantined, 7), replayed, true, arriveReopen},
		"QuarantinedNotReplaySettles":    {saga(Quarantined, 7), replayed, false, arriveSettle},
		"QuarantinedWithoutRecord":       {saga(Quarantined, 0), req, false, arriveFinish},
		"QuarantinedWithoutRecordReplay": {saga(Quarantined, 0), replayed, true, arriveFinish},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, c.want, onArrival(c.sg, c.req, c.replay))
		})
	}
}

func TestAttemptNumber(t *testing.T) {
	t.Parallel()
	cases := map[string]struct {
		attempts, released int
		delivered          uint64
		want               int
	}{
		"FirstDelivery":                 {0, 0, 1, 1},
		"RetryAfterOneRecorded":         {1, 0, 2, 2},
		"CrashMidAttemptCounts":         {0, 0, 2, 2},
		"ShutdownReleaseDoesNotCount":   {0, 1, 2, 1},
		"ReopenedSagaNewMessage":        {0, 0, 1, 1},
		"StateAheadOfDeliveries":        {3, 0, 1, 4},
		"ReleasedAndCrashed":            {1, 1, 4, 3},
		"MoreReleasedThanDeliveredSafe": {0, 5, 1, 1},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, c.want, attemptNumber(&Saga{Attempts: c.attempts, Released: c.released}, c.delivered))
		})
	}
}

func TestTerminalReason(t *testing.T) {
	t.Parallel()
	cases := map[string]struct {
		kind     schemas.CompensationKind
		err      error
		attempts int
		want     string
	}{
		"OneAttempt": {schemas.CompensationDeleteBranch, errors.New("protected branch"), 1, "branch deletion failed for DELETE_BRANCH t: protected branch"},
		"Retried":    {schemas.CompensationRemoveWorktree, errors.New("busy"), 2, "worktree removal failed for REMOVE_WORKTREE t: busy (after 2 attempts)"},
		"OtherKind":  {"RELEASE_LOCK", errors.New("gone"), 1, "release lock compensation failed for RELEASE_LOCK t: gone"},
		"NoHandler":  {"RELEASE_LOCK", ErrNoHandler, 0, "no compensation handler registered for RELEASE_LOCK t: parked for a person"},
		"Vanished":   {schemas.CompensationDeleteBranch, errVanished, 2, "branch deletion failed for DELETE_BRANCH t: " + errVanished.Error() + " (after 2 attempts)"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, c.want, terminalReason(&Saga{Kind: c.kind, Target: "t"}, c.err, c.attempts))
		})
	}
}

func TestDecideOnSagaHistory(t *testing.T) {
	t.Parallel()
	pol := retry.Policy{Name: "t", MaxAttempts: 3, AttemptTimeout: time.Second, Schedule: retry.Linear{Step: 30 * time.Second}}
	failed := func(n int) schemas.AttemptRecord {
		return schemas.AttemptRecord{Attempt: n, Class: "retryable", Error: "index.lock exists"}
	}
	cases := map[string]struct {
		hist   []schemas.AttemptRecord
		cur    retry.Attempt
		action retry.Action
		delay  time.Duration
		reason schemas.Reason
	}{
		"FirstFailureRetriesAfterTheSchedule": {nil, retry.Attempt{Number: 1, Class: retry.ClassRetryable}, retry.ActionRetry, 30 * time.Second, ""},
		"SecondFailureWaitsLonger":            {[]schemas.AttemptRecord{failed(1)}, retry.Attempt{Number: 2, Class: retry.ClassRetryable}, retry.ActionRetry, time.Minute, ""},
		"LastAttemptSpent":                    {[]schemas.AttemptRecord{failed(1), failed(2)}, retry.Attempt{Number: 3, Class: retry.ClassRetryable}, retry.ActionQuarantine, 0, schemas.ReasonExhausted},
		"TerminalStopsAtOnce":                 {nil, retry.Attempt{Number: 1, Class: retry.ClassTerminal}, retry.ActionQuarantine, 0, schemas.ReasonTerminal},
		"RetryAfterWins":                      {nil, retry.Attempt{Number: 1, Class: retry.ClassRetryable, RetryAfter: 5 * time.Second}, retry.ActionRetry, 5 * time.Second, ""},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			d := decide(pol, &Saga{Errors: c.hist}, c.cur)
			require.Equal(t, c.action, d.Action)
			require.Equal(t, c.delay, d.Delay)
			require.Equal(t, c.reason, d.Reason)
		})
	}
}

func TestSagaKey(t *testing.T) {
	t.Parallel()
	for id, want := range map[string]string{
		"saga-42":     "saga-42",
		"loop/42":     "loop/42",
		"a.b":         "a.b",
		"has space":   "b64.aGFzIHNwYWNl",
		".leading":    "b64.LmxlYWRpbmc",
		"trailing.":   "b64.dHJhaWxpbmcu",
		"sternchen*>": "b64.c3Rlcm5jaGVuKj4",
	} {
		require.Equal(t, want, sagaKey(id), id)
	}
}
