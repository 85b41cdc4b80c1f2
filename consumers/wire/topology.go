package wire

import (
	"encoding/base64"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/personaq/personaq/schemas"
)

// Topology names the streams and subjects personaq uses. The zero value is
// completed by WithDefaults.
type Topology struct {
	// RequestsStream holds persona requests (limits retention: acks write
	// nothing, and the runtime purges what every persona's consumer has
	// acknowledged; a stream made as a work queue by an older version stays
	// one until migrated). Default: "PERSONAQ_REQUESTS".
	RequestsStream string
	// RequestsPrefix is the subject prefix; requests for persona P are
	// published on <prefix>.P. Default: "personaq.requests".
	RequestsPrefix string
	// QuarantineStream holds quarantine records (limits retention, so they
	// can be browsed and replayed). Default: "PERSONAQ_QUARANTINE".
	QuarantineStream string
	// QuarantinePrefix: records go to <prefix>.<reason>.<persona>.
	// Default: "personaq.quarantine".
	QuarantinePrefix string
	// OutcomesStream holds each request's terminal record (the outcome
	// event), written once. Default: "PERSONAQ_OUTCOMES".
	OutcomesStream string
	// OutcomesPrefix: records go to <prefix>.<outcome>.<persona>.<request
	// key> (see RequestKey). Default: "personaq.outcomes".
	OutcomesPrefix string
	// OutputsBucket is the object store bucket for persona answers larger
	// than InlineOutputMax. Default: "PERSONAQ_OUTPUTS".
	OutputsBucket string
	// InlineOutputMax is the largest answer kept inline in the terminal
	// record; larger ones go to OutputsBucket. Default: 64 KiB.
	InlineOutputMax int
	// AttemptsStream holds attempt events (started, failed), for callers
	// that follow a request live; memory storage whatever Storage says
	// (they are not a record). Default: "PERSONAQ_ATTEMPTS".
	AttemptsStream string
	// AttemptsPrefix: events go to <prefix>.<request key>.<kind>.
	// Default: "personaq.attempts".
	AttemptsPrefix string
	// AttemptsMaxAge bounds how long attempt events are kept. Default: 24h.
	AttemptsMaxAge time.Duration
	// AttemptsMaxBytes bounds the attempt events' memory: past it the
	// oldest go first, whatever their age (a caller resuming that far back
	// starts at the oldest kept). Reserved from the server's JetStream
	// memory. Default: 256 MiB.
	AttemptsMaxBytes int64
	// Output sets the live output stream (see OutputTopology).
	Output OutputTopology
	// Replicas for every stream (1 or 3 on a cluster). Default: 1.
	Replicas int
	// Storage for every stream. Default: file.
	Storage jetstream.StorageType
	// DuplicateWindow is the Nats-Msg-Id dedup window. Default: 2m.
	DuplicateWindow time.Duration
	// OutcomesMaxAge is how long terminal records (and the outputs they
	// reference) are kept. Default: 7 days.
	OutcomesMaxAge time.Duration
}

// WithDefaults fills unset fields.
func (t Topology) WithDefaults() Topology {
	def := func(s *string, v string) {
		if *s == "" {
			*s = v
		}
	}
	def(&t.RequestsStream, schemas.DefaultRequestsStream)
	def(&t.RequestsPrefix, schemas.DefaultRequestsPrefix)
	def(&t.QuarantineStream, schemas.DefaultQuarantineStream)
	def(&t.QuarantinePrefix, schemas.DefaultQuarantinePrefix)
	def(&t.OutcomesStream, schemas.DefaultOutcomesStream)
	def(&t.OutcomesPrefix, schemas.DefaultOutcomesPrefix)
	def(&t.OutputsBucket, schemas.DefaultOutputsBucket)
	def(&t.AttemptsStream, schemas.DefaultAttemptsStream)
	def(&t.AttemptsPrefix, schemas.DefaultAttemptsPrefix)
	if t.InlineOutputMax == 0 {
		t.InlineOutputMax = DefaultInlineOutputMax
	}
	if t.AttemptsMaxAge == 0 {
		t.AttemptsMaxAge = 24 * time.Hour
	}
	if t.AttemptsMaxBytes == 0 {
		t.AttemptsMaxBytes = DefaultAttemptsMaxBytes
	}
	if t.Replicas == 0 {
		t.Replicas = 1
	}
	if t.DuplicateWindow == 0 {
		t.DuplicateWindow = 2 * time.Minute
	}
	if t.OutcomesMaxAge == 0 {
		t.OutcomesMaxAge = 7 * 24 * time.Hour
	}
	t.Output = t.Output.withDefaults()
	return t
}

// Validate names the first bad field.
func (t Topology) Validate() error {
	switch {
	case t.Replicas != 1 && t.Replicas != 3 && t.Replicas != 5:
		return fmt.Errorf("%w: topology.replicas: must be 1, 3 or 5, got %d", ErrInvalidConfig, t.Replicas)
	case t.DuplicateWindow < 0:
		return fmt.Errorf("%w: topology.duplicate_window: must not be negative", ErrInvalidConfig)
	case t.InlineOutputMax < 0 || t.InlineOutputMax > maxInlineOutput:
		return fmt.Errorf("%w: topology.inline_output_max: must be between 0 and %d bytes, got %d", ErrInvalidConfig, maxInlineOutput, t.InlineOutputMax)
	case t.OutcomesMaxAge < 0 || t.AttemptsMaxAge < 0:
		return fmt.Errorf("%w: topology: outcomes_max_age and attempts_max_age must not be negative", ErrInvalidConfig)
	case t.AttemptsMaxBytes < 0:
		return fmt.Errorf("%w: topology.attempts_max_bytes must not be negative", ErrInvalidConfig)
	}
	return t.Output.validate()
}

// RequestSubject is the subject persona requests for persona are published on.
func (t Topology) RequestSubject(persona string) string { return t.RequestsPrefix + "." + persona }

// QuarantineSubject is where a record with reason for persona is stored.
func (t Topology) QuarantineSubject(reason, persona string) string {
	return schemas.QuarantineSubject(t.QuarantinePrefix, schemas.Reason(reason), persona)
}

// DefaultAttemptsMaxBytes is the default Topology.AttemptsMaxBytes: at
// about 400 bytes an event, some 650,000 events.
const DefaultAttemptsMaxBytes = 256 << 20

// DefaultInlineOutputMax is the default Topology.InlineOutputMax.
const DefaultInlineOutputMax = 64 << 10

// maxInlineOutput keeps a terminal record with its inline output well under
// the schema's message bound.
const maxInlineOutput = 256 << 10

// OutcomeSubject is where the terminal record of request requestID for
// persona is stored.
func (t Topology) OutcomeSubject(outcome, persona, requestID string) string {
	return t.OutcomesPrefix + "." + outcome + "." + schemas.SubjectToken(persona) + "." + RequestKey(requestID)
}

// OutcomeFilter matches the terminal record of request requestID whatever
// its outcome: the one subject a create-once write checks and a lookup reads.
func (t Topology) OutcomeFilter(requestID string) string {
	return t.OutcomesPrefix + ".*.*." + RequestKey(requestID)
}

// AttemptSubject is where attempt events of request requestID go.
func (t Topology) AttemptSubject(requestID string, kind string) string {
	return t.AttemptsPrefix + "." + RequestKey(requestID) + "." + kind
}

// AttemptFilter matches every attempt event of request requestID.
func (t Topology) AttemptFilter(requestID string) string {
	return t.AttemptsPrefix + "." + RequestKey(requestID) + ".*"
}

// CancelledFilter matches every cancelled terminal record.
func (t Topology) CancelledFilter() string {
	return t.OutcomesPrefix + "." + string(schemas.OutcomeCancelled) + ".>"
}

// RequestKey turns a request id into one subject token (and object name):
// ids made of letters, digits, '-' and '_' are used as they are (UUIDs,
// the default); any other id is "~" + its base64url encoding, so distinct
// ids never share a key.
func RequestKey(requestID string) string {
	if plainKey(requestID) {
		return requestID
	}
	return "~" + base64.RawURLEncoding.EncodeToString([]byte(requestID))
}

func plainKey(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}

// Durable is the name of the durable consumer all replicas share for persona.
func Durable(persona string) string { return schemas.Durable(persona) }
