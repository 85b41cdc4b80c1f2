package consumers

import (
	"time"

	"github.com/personaq/personaq/consumers/transport"
	"github.com/personaq/personaq/retry"
	"github.com/personaq/personaq/schemas"
)

// attemptState is what the stages of one delivery know about it: where it
// came from, the request it carries once decoded, and the attempt being
// run. How the delivery ends is not kept here: the stage that decides it
// returns an ending (see process).
type attemptState struct {
	persona  *personaRuntime
	delivery *transport.Delivery
	log      stateLog
	started  time.Time

	// Set by decode.
	req *schemas.PersonaRequest
	// policy is read only: it may be shared by the persona's requests.
	policy *retry.Policy
	corrID string
	// deadline is the caller's step deadline (zero: none).
	deadline time.Time
	// rawID is the request id read from the bytes of a message that did
	// not decode ("" when it could not be read either).
	rawID string

	// Set by begin: the request's earlier attempts, the attempt's number,
	// and its lease in the ledger (nil without a ledger).
	history []retry.Attempt
	attempt retry.Attempt
	lease   *attemptLease
	// invoked: the handler was called for this attempt (commit records it
	// in the ledger).
	invoked bool
}

// verdict is how a message is settled.
type verdict uint8

const (
	_ verdict = iota // the zero value: no verdict reached (commit releases it)
	// verdictAck: succeeded (or a duplicate of a step already done).
	verdictAck
	// verdictRetry: the next attempt after delay.
	verdictRetry
	// verdictRelease: redelivered after delay without counting an attempt
	// (shutdown, ledger unavailable, flow control, running elsewhere).
	verdictRelease
	// verdictQuarantine: store a record with decision.Reason, then Term.
	verdictQuarantine
	// verdictSettled: the request already has its terminal record (final);
	// settle the message the way that record says, running nothing.
	verdictSettled
	// verdictFenced: the attempt lost its lease (or its claim on the
	// message); settle nothing and leave the message to the server.
	verdictFenced
)

// ending is how one delivery ends: every stage that decides it returns
// one, and commit (commit.go) is the one place that acts on it.
type ending struct {
	verdict verdict
	// delay is when the message comes back (verdictRetry, verdictRelease).
	delay time.Duration
	// decision is what was decided (retry.Decide's, or a stage's own): the
	// reason and detail of a quarantine, whether the attempt counts.
	decision retry.Decision
	// duplicate: an ack of a step the ledger says is already done.
	duplicate bool
	// output is the persona's answer (verdictAck), stored with the record.
	output []byte
	// outcome: commit writes a terminal record with this outcome and no
	// quarantine record, then settles by it (verdictSettled, final nil: a
	// request not started within its queue wait).
	outcome schemas.Outcome
	// final is the request's terminal record once stored or found.
	final *schemas.OutcomeEvent
	// stored is the quarantine record a previous delivery already wrote (it
	// crashed before terming the message); storedSeq is its sequence.
	stored    *schemas.QuarantineRecord
	storedSeq uint64
	// freshRecord: this delivery stored the quarantine record (withdrawn
	// if the terminal record that stands says otherwise).
	freshRecord bool
	// effects are what the attempt's end asks of flow control and the
	// observers; decide returns them, commit applies them first.
	effects effects
	// settled is what commit sent the broker (for the settle span).
	settled settleOp
}

// effects are an attempt's consequences beyond its settle, returned by
// decide as data (decide does no I/O) and applied by commit.
type effects struct {
	// ran: the handler ran to an outcome (err, what it returned): the
	// circuit counts it, the limiter settles its tokens, the metrics and
	// the attempt-failed event report it.
	ran bool
	err error
	// throttled: the provider throttled the attempt (429, 529).
	throttled bool
	// coolDown: the persona's limiter cools down for wait and the attempt
	// is released uncounted until it ends; the ending decide returned is
	// then only a placeholder. When the limiter cannot be reached the
	// attempt is decided as an ordinary retryable failure.
	coolDown bool
	wait     time.Duration
	// cancelled: the attempt stopped for its request's cancel; its event
	// goes out, and its cancelled record is read when final is unknown.
	cancelled bool
}

// settleOp is what commit sent the broker for a delivery.
type settleOp uint8

const (
	settledNothing settleOp = iota // abandoned, or not settled yet
	settledAck
	settledTerm
	settledRetry
	settledRelease
)

// released ends a delivery without counting an attempt: the message comes
// back after delay.
func released(delay time.Duration) ending {
	return ending{verdict: verdictRelease, delay: delay, decision: retry.Decision{Action: retry.ActionRetry, Delay: delay}}
}

// quarantined ends the request with decision's reason.
func quarantined(d retry.Decision) ending { return ending{verdict: verdictQuarantine, decision: d} }

// settledBy settles a delivery the way the request's terminal record says.
func settledBy(final *schemas.OutcomeEvent) ending {
	return ending{verdict: verdictSettled, final: final}
}

// fenced settles nothing: the delivery lost its lease or its claim.
var fenced = ending{verdict: verdictFenced}

// hasFallback reports whether the request names a fallback agent.
func (st *attemptState) hasFallback() bool { return st.req != nil && st.req.Agents.Fallback != "" }

// agentFor returns the agent name that runs an attempt in role.
func (st *attemptState) agentFor(role retry.Role) string {
	if role == retry.RoleFallback {
		return st.req.Agents.Fallback
	}
	return st.req.Agents.Primary
}
