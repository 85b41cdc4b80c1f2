package schemas

import "strings"

// Default names of the streams, subject prefixes, consumers and buckets
// every personaq process shares. A deployment may rename them
// (wire.Topology, saga.Topology); these are what it starts from.
const (
	// DefaultRequestsStream holds persona requests (limits retention,
	// trimmed up to each persona consumer's ack floor).
	DefaultRequestsStream = "PERSONAQ_REQUESTS"
	// DefaultRequestsPrefix: requests for persona P go to <prefix>.P.
	DefaultRequestsPrefix = "personaq.requests"
	// DefaultQuarantineStream holds quarantine records (limits retention).
	DefaultQuarantineStream = "PERSONAQ_QUARANTINE"
	// DefaultQuarantinePrefix: records go to <prefix>.<reason>.<persona>.
	DefaultQuarantinePrefix = "personaq.quarantine"
	// DefaultQuarantineIndexBucket is the KV bucket of the quarantine
	// writer's second dedup layer.
	DefaultQuarantineIndexBucket = "personaq_quarantine_index"
	// DefaultQuarantinePayloadBucket is the object store where records keep
	// payloads and headers too large to fit inside them.
	DefaultQuarantinePayloadBucket = "PERSONAQ_QUARANTINE_PAYLOADS"
	// DefaultOutcomesStream holds one terminal record per request.
	DefaultOutcomesStream = "PERSONAQ_OUTCOMES"
	// DefaultOutcomesPrefix: records go to <prefix>.<outcome>.<persona>.<request key>.
	DefaultOutcomesPrefix = "personaq.outcomes"
	// DefaultOutputsBucket is the object store of outputs too large to be
	// inline in their terminal record.
	DefaultOutputsBucket = "PERSONAQ_OUTPUTS"
	// DefaultAttemptsStream holds attempt events (memory storage).
	DefaultAttemptsStream = "PERSONAQ_ATTEMPTS"
	// DefaultAttemptsPrefix: events go to <prefix>.<request key>.<kind>.
	DefaultAttemptsPrefix = "personaq.attempts"
	// DefaultAdvisoryStream captures the requests stream's MAX_DELIVERIES
	// advisories, so none is lost while no listener runs.
	DefaultAdvisoryStream = "PERSONAQ_ADVISORIES"
	// DefaultAdvisoryDurable is the consumer every advisory listener shares.
	DefaultAdvisoryDurable = "personaq-max-deliveries"
	// DefaultCompensationsStream holds saga compensation requests.
	DefaultCompensationsStream = "PERSONAQ_COMPENSATIONS"
	// DefaultCompensationsPrefix: compensations of kind K go to <prefix>.K.
	DefaultCompensationsPrefix = "personaq.compensations"
	// DefaultCompensationsDurable is the consumer every compensation runner shares.
	DefaultCompensationsDurable = "personaq-compensations"
	// DefaultSagaBucket is the KV bucket of saga states (key: saga id).
	DefaultSagaBucket = "personaq_sagas"
)

// Durable is the durable consumer of a persona's requests, shared by every
// replica serving it.
func Durable(persona string) string { return "personaq-" + persona }

// Message headers personaq reads or writes.
const (
	// HeaderCorrelationID carries the orchestrator's correlation id; the
	// runtime reads it when a request has none in its body.
	HeaderCorrelationID = "Correlation-Id"
	// HeaderDeadline is a request's step deadline (RFC 3339): a delivery
	// past it is not run or retried.
	HeaderDeadline = "Personaq-Deadline"
	// HeaderMessageUUID carries a watermill message's UUID through
	// JetStream, the same on every redelivery.
	HeaderMessageUUID = "Personaq-Message-Uuid"
	// HeaderReplayOf names the quarantine record a message was replayed from.
	HeaderReplayOf = "Personaq-Replay-Of"
	// HeaderReplayCount counts the replays of the original request (1, 2, …).
	HeaderReplayCount = "Personaq-Replay-Count"
	// HeaderOriginalRequestID is the request id of the first publication.
	HeaderOriginalRequestID = "Personaq-Original-Request-Id"
	// HeaderSaga carries the saga id on compensation requests and records.
	HeaderSaga = "Personaq-Saga"
	// HeaderReason, HeaderPersona and HeaderTask label a quarantine record,
	// so it can be filtered without decoding it.
	HeaderReason  = "Personaq-Reason"
	HeaderPersona = "Personaq-Persona"
	HeaderTask    = "Personaq-Task"
)

// The persona contract beside the envelope: the environment a command
// persona runs with, and the headers an HTTP persona is called with.
const (
	EnvAttempt          = "PERSONAQ_ATTEMPT"
	EnvAgent            = "PERSONAQ_AGENT"
	EnvRole             = "PERSONAQ_ROLE"
	EnvTaskID           = "PERSONAQ_TASK_ID"
	EnvStep             = "PERSONAQ_STEP"
	EnvPersona          = "PERSONAQ_PERSONA"
	EnvRequestID        = "PERSONAQ_REQUEST_ID"
	EnvCorrelationID    = "PERSONAQ_CORRELATION_ID"
	EnvIdempotencyKey   = "PERSONAQ_IDEMPOTENCY_KEY"
	EnvProgressInterval = "PERSONAQ_PROGRESS_INTERVAL_MS"

	PersonaHeaderCorrelationID    = "X-Correlation-ID"
	PersonaHeaderIdempotencyKey   = "Idempotency-Key"
	PersonaHeaderAttempt          = "X-Personaq-Attempt"
	PersonaHeaderAgent            = "X-Personaq-Agent"
	PersonaHeaderLeaseDeadline    = "X-Personaq-Lease-Deadline"
	PersonaHeaderProgressInterval = "X-Personaq-Progress-Interval-Ms"
)

// MaxDeliveriesAdvisorySubject is the subject of the MAX_DELIVERIES
// advisories nats-server publishes for every consumer of stream.
func MaxDeliveriesAdvisorySubject(stream string) string {
	return "$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES." + stream + ".*"
}

// QuarantineSubject is where a record with reason for persona is stored
// under prefix: <prefix>.<reason>.<persona>, "_" standing for an empty
// token.
func QuarantineSubject(prefix string, reason Reason, persona string) string {
	return prefix + "." + SubjectToken(string(reason)) + "." + SubjectToken(persona)
}

// SubjectToken keeps a subject token valid when a value is empty.
func SubjectToken(s string) string {
	if s == "" {
		return "_"
	}
	return s
}

// ValidSubjectToken reports whether s can be used as one subject token.
func ValidSubjectToken(s string) bool {
	return s != "" && !strings.ContainsAny(s, ".*> \t\r\n")
}
