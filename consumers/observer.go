package consumers

import (
	"time"

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
	// RedeliveryLateness reports how late a retry's attempt started
	// against its due time: the previous attempt's end plus the delay that
	// was asked for (negative: early).
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
