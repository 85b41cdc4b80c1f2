package consumers

import (
	"time"

	"github.com/personaq/personaq/consumers/ledger"
	"github.com/personaq/personaq/retry"
	"github.com/personaq/personaq/schemas"
)

// Observer receives the runtime's measurements (metrics live outside this
// package). Calls are made on hot paths: implementations must be cheap and
// safe for concurrent use.
type Observer interface {
	// Attempt is called once per handler invocation with how it ended.
	Attempt(persona string, class retry.Class, took time.Duration)
	// Outcome is called once per request reaching a terminal state.
	Outcome(persona string, outcome schemas.Outcome, reason schemas.Reason)
	// InFlight is called with +1 when an attempt starts and −1 when it ends.
	InFlight(persona string, delta int)
	// RedeliveryLateness reports how late a retry arrived compared with the
	// delay that was asked for (negative: early).
	RedeliveryLateness(persona string, late time.Duration)
	// LedgerCall reports one ledger round trip.
	LedgerCall(op string, took time.Duration, err error)
	// SettleRefused is called when a delivery would have ended a request
	// that already has a different terminal record (a stale or racing
	// replica): the record stands, outcome is what was refused.
	SettleRefused(persona string, outcome schemas.Outcome)
}

// FenceObserver is an Observer that also counts settles refused to a stale
// holder: a replica that lost an attempt's lease (frozen, partitioned,
// Redis unreachable) and would otherwise have acked, nak'd, termed or
// recorded a request another replica holds now. op is what was refused:
// ack, nak, term, finish, quarantine record, terminal record.
type FenceObserver interface {
	Observer
	StaleSettle(persona, op string)
}

type nopObserver struct{}

func (nopObserver) Attempt(string, retry.Class, time.Duration)      {}
func (nopObserver) Outcome(string, schemas.Outcome, schemas.Reason) {}
func (nopObserver) InFlight(string, int)                            {}
func (nopObserver) RedeliveryLateness(string, time.Duration)        {}
func (nopObserver) LedgerCall(string, time.Duration, error)         {}
func (nopObserver) SettleRefused(string, schemas.Outcome)           {}

// lateness is how late this delivery is against the delay Decide gave the
// previous attempt; ok is false when there is nothing to compare.
func lateness(p retry.Policy, hasFallback bool, history []retry.Attempt, received time.Time) (time.Duration, bool) {
	if len(history) == 0 {
		return 0, false
	}
	last := history[len(history)-1]
	if last.At.IsZero() || last.Error == ledger.LostAttemptError {
		return 0, false
	}
	if lo, hi, _ := retry.DelayRange(p.WithDefaults().Schedule, last.Number); lo != hi && last.RetryAfter == 0 {
		return 0, false // a jittered delay cannot be recomputed
	}
	d := retry.Decide(retry.Input{Policy: p, HasFallback: hasFallback, History: history[:len(history)-1], Current: last})
	if d.Action != retry.ActionRetry {
		return 0, false
	}
	return received.Sub(last.At.Add(last.Duration).Add(d.Delay)), true
}
