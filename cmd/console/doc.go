// Package console is personaq's web console for operators: server-rendered
// pages (html/template, assets embedded with go:embed, a little hand-written
// JavaScript, no build step) over a deployment's NATS JetStream and, for
// task timelines, its Redis attempt ledger.
//
//	/                 overview: personas (pending, in flight, paused, outcomes
//	                  and retries over the last hour), quarantine by reason
//	/quarantine       records filtered by reason, persona, task, since; paged
//	/quarantine/{seq} one record: error history, payload, headers
//	/task             a task's (or request's) attempts, progress chart, result
//	/live             outcomes and attempt events as they happen (SSE)
//	/jobs/{id}        a replay or purge: the dry run first, then its progress
//
// Anything that changes state (replay, purge, pause, resume) is a POST that
// needs the console token (a login cookie, or Authorization: Bearer) and a
// CSRF token (double submit: a SameSite=Strict cookie and a form field);
// Config.ReadOnly hides and refuses them. Nothing is logged but decisions,
// never a token or a payload.
package console
