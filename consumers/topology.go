package consumers

import (
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// Topology names the streams and subjects personaq uses. The zero value is
// completed by WithDefaults.
type Topology struct {
	// RequestsStream holds persona requests (work-queue retention).
	// Default: "PERSONAQ_REQUESTS".
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
	// OutcomesStream holds outcome events. Default: "PERSONAQ_OUTCOMES".
	OutcomesStream string
	// OutcomesPrefix: events go to <prefix>.<outcome>.<persona>.
	// Default: "personaq.outcomes".
	OutcomesPrefix string
	// Replicas for every stream (1 or 3 on a cluster). Default: 1.
	Replicas int
	// Storage for every stream. Default: file.
	Storage jetstream.StorageType
	// DuplicateWindow is the Nats-Msg-Id dedup window. Default: 2m.
	DuplicateWindow time.Duration
	// OutcomesMaxAge bounds how long outcome events are kept. Default: 7 days.
	OutcomesMaxAge time.Duration
}

// WithDefaults fills unset fields.
func (t Topology) WithDefaults() Topology {
	def := func(s *string, v string) {
		if *s == "" {
			*s = v
		}
	}
	def(&t.RequestsStream, "PERSONAQ_REQUESTS")
	def(&t.RequestsPrefix, "personaq.requests")
	def(&t.QuarantineStream, "PERSONAQ_QUARANTINE")
	def(&t.QuarantinePrefix, "personaq.quarantine")
	def(&t.OutcomesStream, "PERSONAQ_OUTCOMES")
	def(&t.OutcomesPrefix, "personaq.outcomes")
	if t.Replicas == 0 {
		t.Replicas = 1
	}
	if t.DuplicateWindow == 0 {
		t.DuplicateWindow = 2 * time.Minute
	}
	if t.OutcomesMaxAge == 0 {
		t.OutcomesMaxAge = 7 * 24 * time.Hour
	}
	return t
}

// Validate names the first bad field.
func (t Topology) Validate() error {
	switch {
	case t.Replicas != 1 && t.Replicas != 3 && t.Replicas != 5:
		return fmt.Errorf("%w: topology.replicas: must be 1, 3 or 5, got %d", ErrInvalidConfig, t.Replicas)
	case t.DuplicateWindow < 0:
		return fmt.Errorf("%w: topology.duplicate_window: must not be negative", ErrInvalidConfig)
	}
	return nil
}

// RequestSubject is the subject persona requests for persona are published on.
func (t Topology) RequestSubject(persona string) string { return t.RequestsPrefix + "." + persona }

// QuarantineSubject is where a record with reason for persona is stored.
func (t Topology) QuarantineSubject(reason, persona string) string {
	return t.QuarantinePrefix + "." + reason + "." + token(persona)
}

// OutcomeSubject is where an outcome event for persona is published.
func (t Topology) OutcomeSubject(outcome, persona string) string {
	return t.OutcomesPrefix + "." + outcome + "." + token(persona)
}

// Durable is the name of the durable consumer all replicas share for persona.
func Durable(persona string) string { return "personaq-" + persona }

// token keeps a subject token valid when a value is empty.
func token(s string) string {
	if s == "" {
		return "_"
	}
	return s
}
