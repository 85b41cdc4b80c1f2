// Package tracing carries OpenTelemetry traces through personaq: W3C trace
// context (traceparent, tracestate) in JetStream message headers, the span
// and attribute names the runtime, the client and the quarantine replay
// use. It needs the OpenTelemetry API only: the binary configures the SDK
// (cmd/telemetry, from the standard OTEL_* environment variables).
//
// The shape of a request's trace: the submit's producer span ("send
// personaq.requests.<persona>") is the parent of one consumer span per
// delivery ("process personaq.requests.<persona>", one per attempt, on
// whichever replica ran it), each with a child settle span ("settle …")
// saying how the message was settled. A retry's span also links to the
// previous attempt's span (its traceparent is kept in the attempt ledger).
// A replay of a quarantine record starts a new trace whose send span links
// to the original request's span.
package tracing
