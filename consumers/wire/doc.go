// Package wire is the caller's side of personaq over JetStream: the names
// of the streams and subjects (Topology), the submit every path goes
// through (Submitter), the create-once terminal records and the outputs
// they carry (Outcomes), cancels, the open-request scan, and what a served
// persona's durable consumer says about its retry policy (PersonaInfo).
//
// It imports nats.go, the schemas, the retry policy types and the
// OpenTelemetry API only, so a client (consumers/client, the HTTP API)
// does not carry the runtime; the runtime (package consumers) writes and
// reads through the same code.
package wire
