package dlq

import (
	"strings"
)

// Default stream, subject, consumer and bucket names. They match the
// defaults of consumers.Topology for the streams both packages use.
const (
	// DefaultRequestsStream is the work-queue stream of persona requests.
	DefaultRequestsStream = "PERSONAQ_REQUESTS"
	// DefaultQuarantineStream holds quarantine records (limits retention).
	DefaultQuarantineStream = "PERSONAQ_QUARANTINE"
	// DefaultQuarantinePrefix: records go to <prefix>.<reason>.<persona>.
	DefaultQuarantinePrefix = "personaq.quarantine"
	// DefaultAdvisoryStream captures the MAX_DELIVERIES advisories of the
	// requests stream, so none is lost while no listener runs.
	DefaultAdvisoryStream = "PERSONAQ_ADVISORIES"
	// DefaultAdvisoryDurable is the durable consumer all advisory listeners share.
	DefaultAdvisoryDurable = "personaq-max-deliveries"
	// DefaultIndexBucket is the KV bucket of the writer's second dedup layer.
	DefaultIndexBucket = "personaq_quarantine_index"
	// DefaultPayloadBucket is the object store bucket where records keep
	// payloads and headers too large to fit inside them.
	DefaultPayloadBucket = "PERSONAQ_QUARANTINE_PAYLOADS"
)

// Headers of replayed messages (lineage) and of compensation records.
const (
	// HeaderReplayOf names the quarantine record a message was replayed from.
	HeaderReplayOf = "Personaq-Replay-Of"
	// HeaderReplayCount counts the replays of the original request (1, 2, …).
	HeaderReplayCount = "Personaq-Replay-Count"
	// HeaderOriginalRequestID is the request id of the first publication.
	HeaderOriginalRequestID = "Personaq-Original-Request-Id"
	// HeaderSaga carries the saga id on compensation requests (package
	// consumers/saga) and on their quarantine records.
	HeaderSaga = "Personaq-Saga"
	// HeaderCorrelationID is consumers.HeaderCorrelationID (the runtime
	// reads it when a request has no correlation_id); replays set it so the
	// correlation survives the new request id.
	HeaderCorrelationID = "Correlation-Id"
)

// MaxDeliveriesSubject is the subject of the MAX_DELIVERIES advisories of
// every consumer of stream.
func MaxDeliveriesSubject(stream string) string {
	return "$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES." + stream + ".*"
}

// QuarantineSubjects returns the SubjectFunc of records under prefix:
// <prefix>.<reason>.<persona>, "_" standing for an empty persona. It is the
// same layout as consumers.Topology.QuarantineSubject.
func QuarantineSubjects(prefix string) SubjectFunc {
	return func(reason, persona string) string {
		return prefix + "." + token(reason) + "." + token(persona)
	}
}

// token keeps a subject token valid when a value is empty.
func token(s string) string {
	if s == "" {
		return "_"
	}
	return s
}

// validToken reports whether s can be used as one subject token.
func validToken(s string) bool {
	return s != "" && !strings.ContainsAny(s, ".*> \t\r\n")
}

// lastToken returns the last token of a subject.
func lastToken(subject string) string {
	if i := strings.LastIndexByte(subject, '.'); i >= 0 {
		return subject[i+1:]
	}
	return subject
}
