// Package client is the orchestrator's side of personaq: submit a persona
// request, follow its attempts, and await its terminal record — the
// persona's output, or why the task step is blocked, deferred, escalated or
// past its step deadline.
//
// Run does what a workflow engine's persona-request step does: it reads
// the persona's retry policy from the replicas that serve it, computes the
// step budget
//
//	(maxRetries+1) × attempt timeout + Σ backoff + 30s buffer
//
// (7.5 minutes for a one-minute persona with three retries at 30s, 60s,
// 90s), logs it, submits the request with that deadline in a header, and
// waits no longer. The request stays alive through its retries; when they
// are exhausted the call returns a *StoppedError that matches ErrBlocked.
// A request still unfinished at its deadline is not run again: it ends
// once as deadline_exceeded (ErrStepDeadline).
//
// Every request ends in exactly one terminal record, written once by the
// replica that settles it and kept for the outcomes stream's retention
// (7 days by default), so Await also works for a request that finished
// before the call, or while the caller was restarting.
//
// The client carries no server: it imports nats.go, the schemas, the
// retry policy types and the OpenTelemetry API (through consumers/wire and
// consumers/tracing), not the runtime, the OpenTelemetry SDK or gRPC —
// about 70 packages, held under 130 by a test.
package client
