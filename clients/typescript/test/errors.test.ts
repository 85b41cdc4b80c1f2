// Problem and record mapping onto the error classes (no server needed).
import assert from "node:assert/strict";
import { test } from "node:test";
import {
  ApiError,
  BlockedError,
  BudgetExhaustedError,
  CancelledError,
  ConflictError,
  DeferredError,
  EscalatedError,
  ForbiddenError,
  InvalidRequestError,
  NotFoundError,
  StepDeadlineError,
  StoppedError,
  UnauthorizedError,
  UnavailableError,
  UnknownPersonaError,
  apiError,
  stoppedError,
  type TerminalRecord,
} from "../src/index.js";

const P = "urn:personaq:problem:";

test("problems map on their type, not their status", () => {
  const cases: [string, number, Function][] = [
    ["unauthorized", 401, UnauthorizedError],
    ["forbidden", 403, ForbiddenError],
    ["not-found", 404, NotFoundError],
    ["no-output", 409, NotFoundError],
    ["conflict", 409, ConflictError],
    ["unknown-persona", 422, UnknownPersonaError],
    ["invalid-json", 400, InvalidRequestError],
    ["invalid-field", 400, InvalidRequestError],
    ["invalid-query", 400, InvalidRequestError],
    ["too-large", 413, InvalidRequestError],
    ["unavailable", 503, UnavailableError],
    ["something-new", 400, ApiError],
  ];
  for (const [slug, status, cls] of cases) {
    const err = apiError(status, { type: P + slug, status });
    assert.equal(err.constructor, cls, slug);
    assert.ok(err instanceof ApiError);
    assert.equal(err.status, status);
  }
  // Not personaq's problem type (a proxy's page): mapped on the status.
  assert.ok(apiError(401, { type: "about:blank" }) instanceof UnauthorizedError);
  assert.equal(apiError(418, { type: "about:blank" }).constructor, ApiError);
});

test("problem extensions are exposed", () => {
  const up = apiError(422, { type: P + "unknown-persona", field: "persona", served_personas: ["echo", "flaky"] });
  assert.ok(up instanceof UnknownPersonaError);
  assert.deepEqual(up.servedPersonas, ["echo", "flaky"]);
  assert.equal(up.field, "persona");
  const un = apiError(503, { type: P + "unavailable" }, 1500);
  assert.ok(un instanceof UnavailableError);
  assert.equal(un.retryAfterMs, 1500);
  const fb = apiError(403, { type: P + "forbidden", scope: "submit" });
  assert.ok(fb instanceof ForbiddenError);
  assert.equal(fb.scope, "submit");
});

function rec(outcome: TerminalRecord["outcome"], reason?: string): TerminalRecord {
  return { schema_version: 1, request_id: "r1", task_id: "t1", step: "plan", persona: "p", outcome, reason, attempts: 2, duration_ms: 5, at: "2026-11-26T00:00:00Z", quarantine_seq: 7, last_error: "boom" };
}

test("stopped records map on outcome, and budget_exhausted is also blocked", () => {
  const cases: [TerminalRecord, Function][] = [
    [rec("quarantined", "exhausted"), BlockedError],
    [rec("quarantined", "terminal"), BlockedError],
    [rec("quarantined", "budget_exhausted"), BudgetExhaustedError],
    [rec("deferred", "deferred"), DeferredError],
    [rec("escalated", "escalated"), EscalatedError],
    [rec("deadline_exceeded", "deadline_exceeded"), StepDeadlineError],
    [rec("cancelled", "cancelled"), CancelledError],
  ];
  for (const [r, cls] of cases) {
    const err = stoppedError(r);
    assert.equal(err.constructor, cls, `${r.outcome}/${r.reason}`);
    assert.ok(err instanceof StoppedError);
    assert.equal(err.record, r);
    assert.equal(err.requestId, "r1");
  }
  assert.ok(stoppedError(rec("quarantined", "budget_exhausted")) instanceof BlockedError);
  assert.equal(stoppedError(rec("quarantined", "exhausted")).message, "task t1 step plan blocked: exhausted after 2 attempt(s) (quarantine seq 7): boom");
});
