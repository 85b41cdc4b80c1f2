// Package dlq is personaq's quarantine store and its operator tools: the
// stream where work that must stop waits for a person. Every request that
// stops ends as one record, and N replicas or sweeps store one record. Saga
// compensations live in package consumers/saga, which writes its
// compensation_failed records here.
//
// Records (schemas.QuarantineRecord) keep the original subject, headers and
// payload untouched with the reason, attempts, error history, provenance and
// replay lineage, on <prefix>.<reason>.<persona> so consumers filter by
// subject.
//
//   - Writer stores records idempotently: JetStream dedup on the record id
//     (Nats-Msg-Id) within the stream's duplicate window, and behind it a KV
//     index (bucket personaq_quarantine_index) for retries that come later —
//     a replica that stored a record and died before acking. A record always
//     fits in one message: a payload (then headers) too large for it goes to
//     the object store PERSONAQ_QUARANTINE_PAYLOADS, referenced by bucket,
//     name, size and digest, and a long error history is trimmed with a
//     marker. Header bytes that are not UTF-8 are kept as
//     HeaderBase64Prefix + base64; Inspector.Message reads a record's
//     message back exactly.
//   - Writer.NoteCaptureFailure and ClearCaptureFailure keep, in the same
//     index, the count of crash-looping messages the max-deliveries
//     listener (package consumers/advisory, which runs beside the runtime)
//     could not capture yet; Inspector.Stats lists them (CaptureFailing).
//   - Inspector lists (newest first, filtered by reason, persona, task and
//     time), counts, shows, replays (fresh request id "<id>-r<N>", lineage
//     headers, idempotent, rate-limited) and purges records.
//
// Errors are the sentinels of errors.go (ErrNotFound, ErrStreamMissing, …),
// wrapped with the stream or sequence they concern. The package runs no
// background loop: what writes records as work runs (the runtime, its
// max-deliveries listener, the saga runner) lives in package consumers and
// its subpackages.
package dlq
