// Package dlq is personaq's quarantine: the stream where work that must stop
// waits for a person. Records keep the original subject, headers and payload
// untouched with the reason, attempts and error history. Writes are
// idempotent (JetStream dedup on a deterministic record id), so N replicas
// quarantining the same failure store one record.
package dlq
