package schemas

import (
	"encoding/json"
	"time"
)

// Version is the schema version every message type carries in its
// "schema_version" field. Decoders reject any other value with
// ErrUnknownVersion instead of guessing.
const Version = 1

// MaxPayloadBytes bounds an encoded message (and so its input payload).
// JetStream's own default max_payload is 1 MiB; we stay under it so a
// quarantine record, which embeds the original payload plus history, still fits.
const MaxPayloadBytes = 512 * 1024

// Agents names the agent that runs odd attempts (Primary) and the one that
// runs even attempts (Fallback, optional): adaptive retry alternates them.
type Agents struct {
	Primary  string `json:"primary"`
	Fallback string `json:"fallback,omitempty"`
}

// PolicyOverrides are inline changes to the named policy, per request.
// Zero fields keep the policy's value.
type PolicyOverrides struct {
	MaxAttempts      int   `json:"max_attempts,omitempty"`
	AttemptTimeoutMs int64 `json:"attempt_timeout_ms,omitempty"`
	// BackoffMs is an explicit schedule: the delay before retry 1, 2, …
	BackoffMs []int64 `json:"backoff_ms,omitempty"`
	// NonRetryable adds error type names (simple names) that end retries.
	NonRetryable []string `json:"non_retryable,omitempty"`
	// QueueWaitMs bounds how long the request may wait to start (see
	// retry.Policy.QueueWait).
	QueueWaitMs int64 `json:"queue_wait_ms,omitempty"`
}

// Budget bounds what one request may spend across all its attempts; a zero
// (absent) limit sets none. A request's budget tightens its policy's, limit
// by limit; it never loosens it.
type Budget struct {
	// MaxTokens bounds input plus output tokens.
	MaxTokens int64 `json:"max_tokens,omitempty"`
	// MaxCostUSD bounds the cost in US dollars, as handlers report it.
	MaxCostUSD float64 `json:"max_cost_usd,omitempty"`
}

// Usage is what attempts consumed at their model provider, as handlers
// reported it: one attempt's in an AttemptRecord, the sum of all of a
// request's in its terminal and quarantine records.
type Usage struct {
	InputTokens  int64 `json:"input_tokens"`
	OutputTokens int64 `json:"output_tokens"`
	// CostUSD is absent when no handler reported a cost.
	CostUSD float64 `json:"cost_usd,omitempty"`
}

// PersonaRequest asks one persona to do one step of a task. It is the
// payload of every message on the requests stream.
type PersonaRequest struct {
	SchemaVersion int    `json:"schema_version"`
	RequestID     string `json:"request_id"`
	TaskID        string `json:"task_id"`
	Step          string `json:"step"`
	Persona       string `json:"persona"`
	Agents        Agents `json:"agents,omitzero"`
	// Input is handed to the persona untouched.
	Input           json.RawMessage  `json:"input,omitempty"`
	Policy          string           `json:"policy,omitempty"`
	PolicyOverrides *PolicyOverrides `json:"policy_overrides,omitempty"`
	// ProgressTotal is the number of sub-tasks the persona is expected to
	// complete (tasks_total); 0 means progress is not tracked.
	ProgressTotal int       `json:"progress_total,omitempty"`
	CorrelationID string    `json:"correlation_id,omitempty"`
	CreatedAt     time.Time `json:"created_at"`
	// Budget, when set, ends the request with ReasonBudgetExhausted rather
	// than run an attempt that would overspend it.
	Budget *Budget `json:"budget,omitempty"`
}

// Outcome is where a request ended.
type Outcome string

// Terminal outcomes.
const (
	OutcomeSucceeded   Outcome = "succeeded"
	OutcomeQuarantined Outcome = "quarantined"
	OutcomeDeferred    Outcome = "deferred"
	OutcomeEscalated   Outcome = "escalated"
	// OutcomeDeadlineExceeded: the step deadline the caller set at submit
	// passed before the request could finish; it was not run (again).
	OutcomeDeadlineExceeded Outcome = "deadline_exceeded"
	// OutcomeCancelled: someone asked for the request to stop (Reason
	// ReasonCancelled, Detail the text they gave, CancelledBy who), or it
	// was not started in time (ReasonQueueWaitExceeded). A queued request
	// never ran; a running attempt was stopped and is not a failure.
	OutcomeCancelled Outcome = "cancelled"
)

// Outcomes lists every terminal outcome, in a stable order.
var Outcomes = []Outcome{
	OutcomeSucceeded, OutcomeQuarantined, OutcomeDeferred, OutcomeEscalated, OutcomeDeadlineExceeded,
	OutcomeCancelled,
}

// Progress is tasks_completed / tasks_total as a persona reports it.
type Progress struct {
	Completed int `json:"completed"`
	Total     int `json:"total"`
}

// OutcomeEvent is a request's terminal record: written once, by the first
// replica to settle the request, and never overwritten. The outcomes stream
// holds exactly one per request (subject
// personaq.outcomes.<outcome>.<persona>.<request key>), so it is both the
// record an orchestrator awaits and the event a watcher sees.
type OutcomeEvent struct {
	SchemaVersion int       `json:"schema_version"`
	RequestID     string    `json:"request_id"`
	TaskID        string    `json:"task_id"`
	Step          string    `json:"step"`
	Persona       string    `json:"persona"`
	Outcome       Outcome   `json:"outcome"`
	Reason        Reason    `json:"reason,omitempty"`
	Attempts      int       `json:"attempts"`
	Agent         string    `json:"agent,omitempty"`
	Progress      *Progress `json:"progress,omitempty"`
	LastError     string    `json:"last_error,omitempty"`
	DurationMs    int64     `json:"duration_ms"`
	CorrelationID string    `json:"correlation_id,omitempty"`
	// QuarantineSeq is the quarantine stream sequence for non-succeeded outcomes.
	QuarantineSeq uint64    `json:"quarantine_seq,omitempty"`
	At            time.Time `json:"at"`
	// Detail is the operator-readable explanation of a stop.
	Detail string `json:"detail,omitempty"`
	// Blocked is set when retries were exhausted or the failure was
	// terminal: the task step cannot go on without someone acting.
	Blocked bool `json:"blocked,omitempty"`
	// Output is the persona's answer when it is small enough to keep
	// inline; larger answers are in OutputRef.
	Output json.RawMessage `json:"output,omitempty"`
	// OutputRef points at an answer kept in the outputs object store.
	OutputRef *ObjectRef `json:"output_ref,omitempty"`
	// SubmittedAt is when the request was created (its created_at).
	SubmittedAt time.Time `json:"submitted_at,omitzero"`
	// CancelledBy names who asked for a cancelled request to stop (an API
	// token's name, "cli", "console", a client's name); empty otherwise.
	CancelledBy string `json:"cancelled_by,omitempty"`
	// Usage sums what every attempt of the request reported consuming;
	// absent when none reported anything.
	Usage *Usage `json:"usage,omitempty"`
	// RequestDigest is RequestDigest of the request the record ends, so a
	// later submit of the same request id with other content is refused
	// after the attempts stream has forgotten the request.
	RequestDigest string `json:"request_digest,omitempty"`
}

// Reason says why a message was quarantined.
type Reason string

// Quarantine reasons: every request that does not succeed ends with one.
const (
	ReasonExhausted          Reason = "exhausted"
	ReasonTerminal           Reason = "terminal"
	ReasonInvalidMessage     Reason = "invalid_message"
	ReasonDeferred           Reason = "deferred"
	ReasonEscalated          Reason = "escalated"
	ReasonCompensationFailed Reason = "compensation_failed"
	ReasonMaxDeliveries      Reason = "max_deliveries"
	// ReasonDeadlineExceeded: the caller's step deadline passed first.
	ReasonDeadlineExceeded Reason = "deadline_exceeded"
	// ReasonUnknownPersona: no replica serves the persona the request names.
	ReasonUnknownPersona Reason = "unknown_persona"
	// ReasonBudgetExhausted: another attempt would have overspent the
	// request's token or cost budget; the task is blocked.
	ReasonBudgetExhausted Reason = "budget_exhausted"
)

// Reasons a request ends with without a quarantine record (OutcomeCancelled).
const (
	// ReasonCancelled: someone cancelled the request (see CancelledBy).
	ReasonCancelled Reason = "cancelled"
	// ReasonQueueWaitExceeded: the request did not start within its queue
	// wait (OutcomeDeadlineExceeded); it never ran.
	ReasonQueueWaitExceeded Reason = "queue_wait_exceeded"
)

// StopReasons lists the reasons an outcome event may carry that are not
// quarantine reasons, in a stable order.
var StopReasons = []Reason{ReasonCancelled, ReasonQueueWaitExceeded}

// Reasons lists every quarantine reason, in a stable order.
var Reasons = []Reason{
	ReasonExhausted, ReasonTerminal, ReasonInvalidMessage, ReasonDeferred,
	ReasonEscalated, ReasonCompensationFailed, ReasonMaxDeliveries,
	ReasonDeadlineExceeded, ReasonUnknownPersona, ReasonBudgetExhausted,
}

// AttemptRecord is one handler invocation as kept in error histories.
type AttemptRecord struct {
	Attempt    int       `json:"attempt"`
	Agent      string    `json:"agent,omitempty"`
	Class      string    `json:"class"`
	ErrorType  string    `json:"error_type,omitempty"`
	Error      string    `json:"error,omitempty"`
	Progress   *Progress `json:"progress,omitempty"`
	DurationMs int64     `json:"duration_ms"`
	At         time.Time `json:"at"`
	// Usage is what the attempt reported consuming; absent when nothing.
	Usage *Usage `json:"usage,omitempty"`
}

// Lineage links a replayed request to the quarantine records it came from.
type Lineage struct {
	// ReplayOf is the quarantine record ID this message was replayed from.
	ReplayOf string `json:"replay_of,omitempty"`
	// ReplayCount counts how many times this request has been replayed.
	ReplayCount int `json:"replay_count,omitempty"`
	// OriginalRequestID is the request ID of the first publication.
	OriginalRequestID string `json:"original_request_id,omitempty"`
}

// QuarantineRecord keeps a message that must stop, untouched, with why.
type QuarantineRecord struct {
	SchemaVersion int `json:"schema_version"`
	// ID is deterministic for one failure (used as Nats-Msg-Id), so N
	// replicas quarantining the same failure store one record.
	ID     string `json:"id"`
	Reason Reason `json:"reason"`
	// Detail is the operator-readable explanation.
	Detail          string `json:"detail"`
	OriginalSubject string `json:"original_subject"`
	// Headers are the original headers. A name or value that is not valid
	// UTF-8 (or starts with dlq.HeaderBase64Prefix) is stored as that prefix
	// and its standard base64, so it is kept byte for byte.
	Headers map[string][]string `json:"headers,omitempty"`
	// Payload is the original message body, byte for byte (base64 in JSON).
	Payload        []byte          `json:"payload"`
	Stream         string          `json:"stream,omitempty"`
	Sequence       uint64          `json:"sequence,omitempty"`
	Deliveries     uint64          `json:"deliveries,omitempty"`
	Attempts       int             `json:"attempts"`
	Errors         []AttemptRecord `json:"errors,omitempty"`
	RequestID      string          `json:"request_id,omitempty"`
	TaskID         string          `json:"task_id,omitempty"`
	Step           string          `json:"step,omitempty"`
	Persona        string          `json:"persona,omitempty"`
	SagaID         string          `json:"saga_id,omitempty"`
	CorrelationID  string          `json:"correlation_id,omitempty"`
	FirstFailureAt time.Time       `json:"first_failure_at,omitzero"`
	LastFailureAt  time.Time       `json:"last_failure_at,omitzero"`
	QuarantinedAt  time.Time       `json:"quarantined_at"`
	Lineage        *Lineage        `json:"lineage,omitempty"`
	// PayloadRef, when set, is where the payload is kept instead (Payload is
	// then empty): a record must fit in one message, the request it keeps
	// may fill one. dlq.Inspector.Message reads it back.
	PayloadRef *PayloadRef `json:"payload_ref,omitempty"`
	// HeadersRef, when set, is where the headers are kept instead (Headers
	// is then empty), as the JSON of the Headers map.
	HeadersRef *PayloadRef `json:"headers_ref,omitempty"`
	// ErrorsOmitted counts the attempts left out of the middle of Errors so
	// that the record fits in one message (Attempts still counts them all).
	ErrorsOmitted int `json:"errors_omitted,omitempty"`
	// Usage sums what every attempt reported consuming (those omitted from
	// Errors included); absent when none reported anything.
	Usage *Usage `json:"usage,omitempty"`
}

// PayloadRef points at bytes a quarantine record keeps in a JetStream
// object store bucket: the same reference terminal records use for large
// outputs.
type PayloadRef = ObjectRef

// CompensationKind names what a compensation undoes.
type CompensationKind string

// Known saga compensation kinds.
const (
	CompensationDeleteBranch   CompensationKind = "DELETE_BRANCH"
	CompensationRemoveWorktree CompensationKind = "REMOVE_WORKTREE"
)

// CompensationRequest asks for one saga's compensation to run.
type CompensationRequest struct {
	SchemaVersion int              `json:"schema_version"`
	RequestID     string           `json:"request_id"`
	SagaID        string           `json:"saga_id"`
	Kind          CompensationKind `json:"kind"`
	// Target is what the compensation acts on, e.g. a branch name.
	Target        string          `json:"target"`
	TaskID        string          `json:"task_id,omitempty"`
	Args          json.RawMessage `json:"args,omitempty"`
	CorrelationID string          `json:"correlation_id,omitempty"`
	CreatedAt     time.Time       `json:"created_at"`
}
