// Package saga runs saga compensations: the requests that undo what a
// failed saga left behind (DELETE_BRANCH, REMOVE_WORKTREE, …), with each
// saga's state in a KV bucket (personaq_sagas).
//
// Publish queues a compensation request on the work-queue stream
// PERSONAQ_COMPENSATIONS and records its saga RUNNING. A Runner consumes the
// requests with the handler (Func) registered for their kind, one delivery
// per attempt:
//
//   - success: the saga is COMPENSATED (only then) and the request acked;
//   - failure: the error is classified (handlers.Classify) and the retry
//     policy decides on the saga's recorded attempt history (retry.Decide),
//     the same decision path as persona requests. A retry hands the request
//     back with NakWithDelay(delay): the broker's redelivery is the backoff,
//     nothing sleeps in process, and the consumer has no BackOff of its own.
//     A stop (terminal error, attempts spent, no handler for the kind) ends
//     the saga QUARANTINED with an operator-readable reason naming the kind
//     and target, and one compensation_failed quarantine record
//     (dlq.Writer) carrying the attempt history; the request is acked after
//     the record is stored, and comes back to write it if that failed.
//
// Attempts are numbered from the saga state, never below the deliveries
// the broker counted (a runner that died mid-attempt may have run the
// handler), except deliveries handed back on purpose (shutdown, snooze). A
// delivery for a terminal saga is settled without running, so a second run
// is a no-op; replaying a compensation_failed record (dlq.Inspector.Replay)
// is the one way to reopen a QUARANTINED saga. Long compensations keep their
// request with InProgress heartbeats every third of the consumer's AckWait.
//
// Runner.Start consumes continuously (what every personaq replica with
// compensation handlers runs); Runner.Sweep is the one-shot form behind
// `personaq compensate sweep`: it returns once nothing is pending and no
// retry is scheduled, or after a bound, naming the sagas still retrying.
//
// The package depends on dlq (records) and retry/handlers (decisions), never
// on the consumers runtime, which imports it.
package saga
