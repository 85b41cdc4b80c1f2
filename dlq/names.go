package dlq

import (
	"strings"

	"github.com/personaq/personaq/schemas"
)

// MaxDeliveriesSubject is the subject of the MAX_DELIVERIES advisories of
// every consumer of stream.
func MaxDeliveriesSubject(stream string) string {
	return schemas.MaxDeliveriesAdvisorySubject(stream)
}

// QuarantineSubjects returns the SubjectFunc of records under prefix
// (schemas.QuarantineSubject).
func QuarantineSubjects(prefix string) SubjectFunc {
	return func(reason, persona string) string {
		return schemas.QuarantineSubject(prefix, schemas.Reason(reason), persona)
	}
}

// lastToken returns the last token of a subject.
func lastToken(subject string) string {
	if i := strings.LastIndexByte(subject, '.'); i >= 0 {
		return subject[i+1:]
	}
	return subject
}
