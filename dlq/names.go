package dlq

import "github.com/personaq/personaq/schemas"

// QuarantineSubjects returns the SubjectFunc of records under prefix
// (schemas.QuarantineSubject).
func QuarantineSubjects(prefix string) SubjectFunc {
	return func(reason, persona string) string {
		return schemas.QuarantineSubject(prefix, schemas.Reason(reason), persona)
	}
}
