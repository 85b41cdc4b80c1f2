// Package schemas defines personaq's wire messages — persona requests,
// outcome events, quarantine records and compensation requests — with one
// JSON Schema (draft 2020-12) per message type in json/, and the decoders and
// encoder that hold every message to its schema.
//
// # Versioning
//
// Every message carries "schema_version": 1 (Version). A decoder rejects any
// other value with ErrUnknownVersion rather than guessing what a newer or
// older producer meant; a missing version is a FieldError on
// "schema_version". Schemas are closed (additionalProperties: false): a
// field this build does not know is an error, not silently dropped, so a
// typo in a field name is caught at the edge. A new field therefore means a
// new schema file and version, rolled out to consumers before producers.
//
// # Decoding
//
// DecodeRequest, DecodeOutcome, DecodeQuarantineRecord and DecodeCompensation
// check, in this order: size (ErrTooLarge above MaxPayloadBytes), that the
// input is a JSON object, schema_version, the schema, and finally that the
// value fits the Go type. Each step's failure is returned as soon as it is
// found. Every error is caused by the input, and is one of:
//
//   - ErrTooLarge, wrapped with the size;
//   - ErrUnknownVersion, wrapped with the version seen;
//   - a *FieldError naming the offending field, which wraps ErrInvalid.
//
// Decoders never panic. The runtime quarantines a message that fails to
// decode with reason invalid_message; it is never dropped.
//
// # Encoding
//
// Encode marshals a message and validates the result against the same
// schema, so nothing is published that a consumer would reject. It sets no
// field implicitly; NewRequest is the helper that fills the version, a
// request ID and the creation time.
package schemas
