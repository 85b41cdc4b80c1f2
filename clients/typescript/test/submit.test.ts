// submit, listing and the API errors against the live personaq.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import {
  Client,
  ConflictError,
  InvalidRequestError,
  NotFoundError,
  UnauthorizedError,
  UnknownPersonaError,
} from "../src/index.js";
import { client, collect, liveUrl, noLive, taskId } from "./live.js";

describe("submit", { skip: noLive, concurrency: true, timeout: 120_000 }, () => {
  it("is idempotent: the same request again answers 200 with the same deadline", async () => {
    const c = client();
    const req = { request_id: crypto.randomUUID(), persona: "echo", task_id: taskId("idem"), step: "s", input: { a: 1 } };
    const first = await c.submit(req);
    assert.equal(first.created, true);
    assert.equal(first.status, "queued");
    assert.equal(first.request_id, req.request_id);
    assert.ok(first.deadline, "the server computed the step deadline");
    await new Promise((r) => setTimeout(r, 20));
    const again = await c.submit(req);
    assert.equal(again.created, false);
    assert.equal(again.request_id, req.request_id);
    assert.equal(again.deadline, first.deadline);
  });

  it("makes a request id when none is given", async () => {
    const st = await client().submit({ persona: "echo", task_id: taskId("id") });
    assert.match(st.request_id, /^[0-9a-f-]{36}$/);
  });

  it("rejects the same id with other content as a conflict carrying the stored request", async () => {
    const c = client();
    const req = { request_id: crypto.randomUUID(), persona: "echo", task_id: taskId("conflict"), input: { a: 1 } };
    await c.submit(req);
    const err = await c.submit({ ...req, input: { a: 2 } }).catch((e: unknown) => e);
    assert.ok(err instanceof ConflictError, `got ${String(err)}`);
    assert.equal(err.status, 409);
    assert.equal(err.request?.request_id, req.request_id);
  });

  it("rejects an unknown persona naming the served ones", async () => {
    const err = await client().submit({ persona: "plannr", task_id: taskId("unknown") }).catch((e: unknown) => e);
    assert.ok(err instanceof UnknownPersonaError, `got ${String(err)}`);
    assert.equal(err.status, 422);
    assert.equal(err.field, "persona");
    assert.ok(err.servedPersonas.includes("echo"), `served: ${err.servedPersonas}`);
  });

  it("rejects an unknown field naming it", async () => {
    const req = { persona: "echo", task_id: taskId("field"), colour: "red" };
    const err = await client().submit(req).catch((e: unknown) => e);
    assert.ok(err instanceof InvalidRequestError, `got ${String(err)}`);
    assert.equal(err.status, 400);
    assert.equal(err.field, "colour");
  });

  it("rejects a body over the size bound", async () => {
    const req = { persona: "echo", task_id: taskId("large"), input: "x".repeat(1100 * 1024) };
    const err = await client().submit(req).catch((e: unknown) => e);
    assert.ok(err instanceof InvalidRequestError, `got ${String(err)}`);
    assert.equal(err.status, 413);
    assert.ok(Number(err.problem.limit_bytes) > 0, "the problem names the limit");
  });

  it("rejects a wrong token", async () => {
    const c = new Client({ baseUrl: liveUrl, token: "not-the-token" });
    const err = await c.submit({ persona: "echo", task_id: taskId("token") }).catch((e: unknown) => e);
    assert.ok(err instanceof UnauthorizedError, `got ${String(err)}`);
    assert.equal(err.status, 401);
    await assert.rejects(c.personas(), UnauthorizedError);
  });
});

describe("reads", { skip: noLive, concurrency: true, timeout: 120_000 }, () => {
  it("lists a task's requests newest first, page after page", async () => {
    const c = client();
    const task = taskId("list");
    const ids: string[] = [];
    for (const step of ["a", "b", "c"]) ids.push((await c.submit({ persona: "echo", task_id: task, step })).request_id);
    const listed = await collect(c.requests({ taskId: task, limit: 2 }));
    assert.deepEqual(listed.map((r) => r.request_id), ids.reverse());
    assert.ok(listed.every((r) => r.task_id === task && r.persona === "echo"));
  });

  it("lists the served personas with their step budget", async () => {
    const ps = await client().personas();
    const echo = ps.find((p) => p.name === "echo");
    assert.ok(echo, `personas: ${ps.map((p) => p.name)}`);
    assert.ok(echo.step_budget_ms > 0);
    assert.ok(echo.max_attempts >= 1);
  });

  it("answers not found for an unknown request", async () => {
    const c = client();
    await assert.rejects(c.result(crypto.randomUUID()), NotFoundError);
    await assert.rejects(c.output(crypto.randomUUID()), NotFoundError);
  });
});
