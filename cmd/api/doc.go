// Package api is personaq's HTTP API server: JSON over HTTP/1.1 under /v1
// for callers in any language (the Python and TypeScript clients, curl),
// built on consumers/client. It submits persona requests (201 once
// JetStream stored them; 200 for the same request again; 409 for the same
// id with other content), answers a request's status with long-polling
// (?wait=30s), streams its output and its attempt events (server-sent
// events with Last-Event-ID resume), lists requests and served personas,
// and serves its OpenAPI 3.1 document (schemas/openapi).
//
// A Server is stateless apart from caches: NATS is its only dependency,
// and any number run behind a load balancer. One wildcard core-NATS
// subscription on the outcomes subjects wakes every waiting long-poll and
// event stream; the request list comes from an in-memory index each
// Server keeps by following the attempts and outcomes streams (bounded by
// Config.IndexSize; a list says truncated when it dropped requests).
//
// Every route except /healthz needs a bearer token with a scope (submit,
// read, cancel, admin); tokens are compared in constant time and never
// logged (their names are). Errors are RFC 9457 problems naming the
// field. `personaq api` and `personaq dev` serve it; see docs/api.md.
package api
