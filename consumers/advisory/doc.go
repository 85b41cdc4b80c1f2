// Package advisory is the runtime's max-deliveries listener: it moves
// crash-looping messages — delivered MaxDeliver times and never settled,
// because their worker died, was killed or hung — from the work-queue
// stream to the quarantine (package dlq), payload intact, with reason
// max_deliveries. Every personaq replica runs one beside its runtime
// (consumers.Runtime starts it); it is separate from dlq, which holds the
// quarantine store and its operator tools and runs no loop.
//
//   - The server's MAX_DELIVERIES advisories are captured in a stream
//     (PERSONAQ_ADVISORIES, work-queue retention) and read on the shared
//     transport (consumers/transport) by a durable consumer every replica
//     shares, so an advisory raised while no listener runs is not lost.
//   - Capture reads the message an advisory names, stores its record with
//     dlq.Writer (idempotent: record id dlq.RecordID(stream, seq)), lets
//     Config.Conclude store the request's terminal record, then removes the
//     message. Any number of replicas may capture the same message.
//   - Sweep finds what was given up on without its advisory being handled
//     (before the advisory stream existed, an advisory lost) and captures it
//     the same way; Start runs it at start and every SweepInterval.
//   - A capture that keeps failing is retried with a growing delay, logged,
//     counted in the quarantine index (dlq.Writer.NoteCaptureFailure, shown
//     by `personaq quarantine stats`) and never stops a sweep.
//
// The runtime itself quarantines a message on its last delivery without
// running it (LastDeliveryDetail is that record's detail); the listener
// stays the net for a message whose last delivery never reached a
// handler. Its loops run on consumers/loop, the lifecycle of personaq's
// background loops.
package advisory
