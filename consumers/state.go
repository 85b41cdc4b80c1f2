package consumers

import (
	"context"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/rs/zerolog"

	"github.com/personaq/personaq/consumers/transport"
	"github.com/personaq/personaq/handlers"
	"github.com/personaq/personaq/retry"
	"github.com/personaq/personaq/schemas"
)

// verdict is how a message is settled; the settle middleware acts on it.
type verdict uint8

const (
	_ verdict = iota // the zero value: no verdict reached (apply releases it)
	// verdictAck: succeeded (or a duplicate of a step already done).
	verdictAck
	// verdictRetry: NakWithDelay(delay) for the next attempt.
	verdictRetry
	// verdictRelease: Nak after delay without counting an attempt
	// (shutdown, ledger unavailable).
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

// attemptState travels with one message through the middleware chain.
type attemptState struct {
	persona  *personaRuntime
	delivery *transport.Delivery
	log      zerolog.Logger
	started  time.Time

	req    *schemas.PersonaRequest
	policy retry.Policy
	corrID string
	// deadline is the caller's step deadline (zero: none).
	deadline time.Time

	ctx     context.Context // the attempt's context, with its timeout
	history []retry.Attempt
	attempt retry.Attempt
	result  handlers.Result
	err     error

	decision  retry.Decision
	verdict   verdict
	delay     time.Duration
	duplicate bool
	// stored is the quarantine record a previous delivery already wrote
	// (it crashed before terming the message); storedSeq is its sequence.
	stored    *schemas.QuarantineRecord
	storedSeq uint64
	// final is the request's terminal record once stored (or found).
	final *schemas.OutcomeEvent
	// lease is the attempt's lease in the ledger (nil without a ledger or
	// before Begin); begunAt is when Begin was sent.
	lease   *attemptLease
	begunAt time.Time
}

type stateKey struct{}

func stateOf(msg *message.Message) *attemptState {
	st, _ := msg.Context().Value(stateKey{}).(*attemptState)
	return st
}

func withState(msg *message.Message, st *attemptState) {
	msg.SetContext(context.WithValue(msg.Context(), stateKey{}, st))
}

// stepKey identifies the ledger entry of the request's task step.
func (st *attemptState) hasFallback() bool { return st.req != nil && st.req.Agents.Fallback != "" }

// agentFor returns the agent name that runs attempt n.
func (st *attemptState) agentFor(role retry.Role) string {
	if role == retry.RoleFallback {
		return st.req.Agents.Fallback
	}
	return st.req.Agents.Primary
}
