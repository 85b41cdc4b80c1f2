// Cancellation against the live personaq (its token is named env): a
// queued request (slowpoke's eight slots filled with long attempts), a
// running one (slowpoke with a 30 s attempt timeout), one waiting to retry
// (flaky with a 30 s backoff), a cancel too late, a task's cancel across two
// personas, an unknown id, and a token without the cancel scope (a
// `personaq api --config` the Go harness starts beside dev).
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import {
  AlreadyEndedError,
  CancelledError,
  type Client,
  ConflictError,
  ForbiddenError,
  NotFoundError,
  type PolicyOverrides,
  type RequestEvent,
  type RequestStatus,
  type Status,
  StoppedError,
  type TerminalRecord,
  isTerminal,
} from "../src/index.js";
import { client, collect, noLive, taskId, within } from "./live.js";

/** slowpoke's attempts last until their timeout: 30 s keeps one running. */
const LONG_ATTEMPT: PolicyOverrides = { attempt_timeout_ms: 30_000, max_attempts: 1 };
/** flaky fails attempt 1 at once; a 30 s backoff keeps it waiting to retry. */
const LONG_BACKOFF: PolicyOverrides = { backoff_ms: [30_000] };
/** The replica's slots per persona in `personaq dev`. */
const DEV_CONCURRENCY = 8;

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Polls the request until its status is want (an id not submitted yet is polled too). */
async function awaitStatus(c: Client, id: string, want: Status, withinMs = 30_000): Promise<void> {
  const end = Date.now() + withinMs;
  for (;;) {
    const st = await c.result(id).catch((e: unknown) => {
      if (e instanceof NotFoundError) return undefined;
      throw e;
    });
    if (st?.status === want) return;
    assert.ok(Date.now() < end, `request ${id} is ${st?.status ?? "unknown"}, not ${want}, after ${withinMs} ms`);
    await sleep(50);
  }
}

/** The request's events, read again until one of kind is among them (the
 * replica publishes a cancelled attempt's event just after the canceller
 * wrote the record). */
async function eventsUntil(c: Client, id: string, kind: string, withinMs = 10_000): Promise<RequestEvent[]> {
  const end = Date.now() + withinMs;
  for (;;) {
    const evs = await collect(c.events(id, { signal: within() }));
    if (kindsOf(evs).includes(kind) || Date.now() > end) return evs;
    await sleep(100);
  }
}

function kindsOf(evs: RequestEvent[]): string[] {
  return evs.map((e) => (e.type === "attempt" ? e.attempt.kind : "terminal"));
}

function assertCancelled(r: TerminalRecord | undefined, reason: string, by = "env"): void {
  assert.ok(r, "a record");
  assert.deepEqual([r.outcome, r.reason, r.detail, r.cancelled_by], ["cancelled", "cancelled", reason, by]);
}

/** Awaits id and returns the CancelledError it must reject with. */
async function awaitCancelled(c: Client, id: string): Promise<CancelledError> {
  const err = await c.wait(id, { deadline: Date.now() + 30_000 }).catch((e: unknown) => e);
  assert.ok(err instanceof CancelledError, `got ${String(err)}`);
  assert.ok(err instanceof StoppedError);
  return err;
}

// Sequential: the queued test fills slowpoke's slots for a moment.
describe("cancel", { skip: noLive, timeout: 120_000 }, () => {
  it("stops a running request: its status, CancelledError and the cancelled attempt event", async () => {
    const c = client();
    const sub = await c.submit({ persona: "slowpoke", task_id: taskId("cancel-run"), policy_overrides: LONG_ATTEMPT });
    await awaitStatus(c, sub.request_id, "running");
    const t0 = Date.now();
    const st = await c.cancel(sub.request_id, { reason: "the orchestrator gave up" });
    assert.equal(st.request_id, sub.request_id);
    assert.equal(st.status, "cancelled");
    assertCancelled(st.record, "the orchestrator gave up");
    const err = await awaitCancelled(c, sub.request_id);
    assertCancelled(err.record, "the orchestrator gave up");
    assert.equal(err.requestId, sub.request_id);
    const evs = await eventsUntil(c, sub.request_id, "cancelled");
    const ks = kindsOf(evs);
    assert.ok(ks.includes("cancelled"), `the running attempt was stopped: ${ks}`);
    assert.ok(Date.now() - t0 < 20_000, "the 30 s attempt was stopped, not waited out");
    assert.equal(ks.filter((k) => k === "started").length, 1, String(ks));
    assert.ok(ks.indexOf("started") < ks.indexOf("cancelled"), String(ks));
    const last = evs[evs.length - 1];
    assert.ok(last.type === "terminal");
    assert.equal(last.status.record?.outcome, "cancelled");
  });

  it("run rejects with CancelledError, with onEvent too", async () => {
    const c = client();
    for (const onEvent of [undefined, () => undefined]) {
      const request_id = crypto.randomUUID();
      const running = c.run({ persona: "slowpoke", task_id: taskId("cancel-runner"), request_id, policy_overrides: LONG_ATTEMPT }, { onEvent })
        .catch((e: unknown) => e);
      await awaitStatus(c, request_id, "running");
      await c.cancel(request_id, { reason: "run stopped" });
      const err = await running;
      assert.ok(err instanceof CancelledError, `onEvent ${onEvent ? "set" : "unset"}: got ${String(err)}`);
      assertCancelled(err.record, "run stopped");
    }
  });

  it("cancels a queued request: it never runs", async () => {
    const c = client();
    const fill = taskId("cancel-fill");
    try {
      const fillers = await Promise.all(
        Array.from({ length: DEV_CONCURRENCY }, (_, i) =>
          c.submit({ persona: "slowpoke", task_id: fill, step: `s${i}`, policy_overrides: LONG_ATTEMPT })),
      );
      for (const f of fillers) await awaitStatus(c, f.request_id, "running");
      const sub = await c.submit({ persona: "slowpoke", task_id: taskId("cancel-queued"), policy_overrides: LONG_ATTEMPT });
      assert.equal((await c.result(sub.request_id, { wait: 500 })).status, "queued", "slowpoke's slots are full");
      const st = await c.cancel(sub.request_id, { reason: "no longer needed" });
      assert.equal(st.status, "cancelled");
      assertCancelled(st.record, "no longer needed");
      assert.equal(st.record?.attempts, 0);
      assert.equal((await c.cancelTask(fill, { reason: "free the slots" })).cancelled.length, DEV_CONCURRENCY);
      assertCancelled((await awaitCancelled(c, sub.request_id)).record, "no longer needed");
      await sleep(500); // slots free: a replica that ran it would have said started by now
      assert.deepEqual(kindsOf(await collect(c.events(sub.request_id, { signal: within() }))), ["queued", "terminal"]);
    } finally {
      await c.cancelTask(fill);
    }
  });

  it("a cancel too late is AlreadyEndedError carrying the succeeded record", async () => {
    const c = client();
    const task = taskId("cancel-late");
    const res = await c.run({ persona: "echo", task_id: task, input: { n: 1 } });
    const err = await c.cancel(res.record.request_id, { reason: "too late" }).catch((e: unknown) => e);
    assert.ok(err instanceof AlreadyEndedError, `got ${String(err)}`);
    assert.ok(err instanceof ConflictError);
    assert.equal(err.status, 409);
    assert.equal(err.record?.outcome, "succeeded");
    assert.equal(err.record?.request_id, res.record.request_id);
    assert.equal(err.request?.status, "succeeded");
    const again = await c.wait(res.record.request_id, { deadline: Date.now() + 5000 });
    assert.deepEqual((again.output as { input: unknown }).input, { n: 1 }, "the record is kept");
  });

  it("cancels a task across two personas, running and waiting to retry", async () => {
    const c = client();
    const task = taskId("cancel-task");
    const slow = await c.submit({ persona: "slowpoke", task_id: task, step: "plan", policy_overrides: LONG_ATTEMPT });
    const flaky = await c.submit({ persona: "flaky", task_id: task, step: "code", policy_overrides: LONG_BACKOFF });
    const other = await c.submit({ persona: "echo", task_id: taskId("cancel-other") });
    await awaitStatus(c, slow.request_id, "running");
    await awaitStatus(c, flaky.request_id, "retrying");
    const got = await c.cancelTask(task, { reason: "workflow cancelled" });
    assert.equal(got.task_id, task);
    assert.deepEqual(got.cancelled.map((s) => `${s.persona}:${s.status}`).sort(), ["flaky:cancelled", "slowpoke:cancelled"]);
    assert.deepEqual(got.already_ended, []);
    for (const s of [slow, flaky]) assertCancelled((await awaitCancelled(c, s.request_id)).record, "workflow cancelled");
    const st = await c.result(other.request_id, { wait: 30_000 });
    assert.equal(st.status, "succeeded", "another task's request is untouched");
    assert.deepEqual((await c.cancelTask(task)).cancelled, [], "nothing open is left");
  });

  it("an unknown id is NotFoundError", async () => {
    const err = await client().cancel(taskId("no-such-request")).catch((e: unknown) => e);
    assert.ok(err instanceof NotFoundError, `got ${String(err)}`);
    assert.equal(err.status, 404);
  });
});

const scopedUrl = process.env.PERSONAQ_SCOPED_URL;
const noScoped = noLive || (scopedUrl ? false : "PERSONAQ_SCOPED_URL is not set: no personaq api with scoped tokens");

describe("cancel scope", { skip: noScoped, timeout: 60_000 }, () => {
  it("a token without the cancel scope is ForbiddenError; the record names the token that cancelled", async () => {
    const orch = client({ baseUrl: scopedUrl, token: process.env.PERSONAQ_SUBMIT_TOKEN });
    const janitor = client({ baseUrl: scopedUrl, token: process.env.PERSONAQ_CANCEL_TOKEN });
    const sub = await orch.submit({ persona: "slowpoke", task_id: taskId("cancel-scope"), policy_overrides: LONG_ATTEMPT });
    for (const call of [() => orch.cancel(sub.request_id, { reason: "not mine" }), () => orch.cancelTask(sub.task_id)]) {
      const err = await call().catch((e: unknown) => e);
      assert.ok(err instanceof ForbiddenError, `got ${String(err)}`);
      assert.equal(err.status, 403);
      assert.equal(err.scope, "cancel");
    }
    assert.ok(!isTerminal((await orch.result(sub.request_id)).status), "the refused cancel changed nothing");
    const st = await janitor.cancel(sub.request_id, { reason: "cleanup" });
    assertCancelled(st.record, "cleanup", "janitor");
    assertCancelled((await awaitCancelled(orch, sub.request_id)).record, "cleanup", "janitor");
  });
});

/** A fetch that answers every call with status and body, and records the calls. */
function stubFetch(status: number, body: unknown): { fetch: typeof fetch; calls: [string, string][] } {
  const calls: [string, string][] = [];
  const f: typeof fetch = async (input, init) => {
    calls.push([String(input), String(init?.body ?? "")]);
    const type = status >= 400 ? "application/problem+json" : "application/json";
    return new Response(JSON.stringify(body), { status, headers: { "Content-Type": type } });
  };
  return { fetch: f, calls };
}

describe("cancel answers (no server)", () => {
  const succeeded: RequestStatus = {
    request_id: "r1", status: "succeeded", persona: "echo", task_id: "t", step: "main", attempts: 1,
    record: { schema_version: 1, request_id: "r1", task_id: "t", step: "main", persona: "echo", outcome: "succeeded", attempts: 1, duration_ms: 1, at: "2026-01-01T00:00:00Z" },
  };
  const conflict = { type: "urn:personaq:problem:conflict", status: 409, detail: "request r1 already ended: succeeded", request: succeeded };

  it("a 409 from cancel is AlreadyEndedError; from submit it stays a ConflictError", async () => {
    const s = stubFetch(409, conflict);
    const c = client({ baseUrl: "http://stub.invalid", token: "t", fetch: s.fetch });
    const late = await c.cancel("r/1", { reason: "gave up" }).catch((e: unknown) => e);
    assert.ok(late instanceof AlreadyEndedError, `got ${String(late)}`);
    assert.equal(late.record?.outcome, "succeeded");
    const sub = await c.submit({ persona: "echo", task_id: "t", request_id: "r1" }).catch((e: unknown) => e);
    assert.ok(sub instanceof ConflictError && !(sub instanceof AlreadyEndedError), `got ${String(sub)}`);
    assert.deepEqual(s.calls[0], ["http://stub.invalid/v1/requests/r%2F1/cancel", '{"reason":"gave up"}']);
  });

  it("a cancel repeated after a lost answer resolves to the cancelled status its first try stored", async () => {
    const cancelled: RequestStatus = {
      ...succeeded, status: "cancelled",
      record: { ...succeeded.record!, outcome: "cancelled", reason: "cancelled", detail: "gave up", cancelled_by: "ci" },
    };
    const answer = stubFetch(409, { ...conflict, request: cancelled });
    let calls = 0;
    const lost: typeof fetch = async (input, init) => {
      if (calls++ === 0) throw new TypeError("fetch failed"); // the connection dropped after the request was sent
      return answer.fetch(input, init);
    };
    const st = await client({ baseUrl: "http://stub.invalid", token: "t", fetch: lost }).cancel("r1", { reason: "gave up" });
    assert.equal(calls, 2);
    assert.equal(st.status, "cancelled");
    assert.equal(st.record?.cancelled_by, "ci");
    // Without a lost answer first, the same 409 is AlreadyEndedError: someone else cancelled.
    const err = await client({ baseUrl: "http://stub.invalid", token: "t", fetch: answer.fetch }).cancel("r1").catch((e: unknown) => e);
    assert.ok(err instanceof AlreadyEndedError, `got ${String(err)}`);
    assert.equal(err.record?.outcome, "cancelled");
  });

  it("cancelTask resolves to the task's answer; no reason sends {}", async () => {
    const answer = { task_id: "t 1", cancelled: [{ ...succeeded, status: "cancelled" }], already_ended: [succeeded] };
    const s = stubFetch(200, answer);
    const got = await client({ baseUrl: "http://stub.invalid", token: "t", fetch: s.fetch }).cancelTask("t 1");
    assert.deepEqual(got, answer);
    assert.deepEqual(s.calls, [["http://stub.invalid/v1/tasks/t%201/cancel", "{}"]]);
  });
});
