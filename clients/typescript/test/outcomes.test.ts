// run against the live personaq: success, large outputs, and each way a
// request stops (the error class, carrying the terminal record).
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import {
  BlockedError,
  BudgetExhaustedError,
  DeferredError,
  EscalatedError,
  StepDeadlineError,
  StoppedError,
  type PersonaRequest,
} from "../src/index.js";
import { client, noLive, taskId } from "./live.js";

describe("run", { skip: noLive, concurrency: true, timeout: 120_000 }, () => {
  it("resolves with the output of a request that succeeded", async () => {
    const input = { goal: "add retries", n: 3 };
    const res = await client().run({ persona: "echo", task_id: taskId("ok"), step: "plan", input });
    assert.equal(res.record.outcome, "succeeded");
    assert.equal(res.record.step, "plan");
    assert.deepEqual((res.output as { input: unknown }).input, input);
    assert.deepEqual(JSON.parse(new TextDecoder().decode(res.outputBytes)), res.output);
  });

  it("reads an output over 64 KiB from the object store", async () => {
    const big = "x".repeat(100 * 1024);
    const c = client();
    const res = await c.run({ persona: "echo", task_id: taskId("big"), input: { big } });
    assert.ok(res.record.output_ref, "a large output is referenced, not inline");
    assert.equal(res.record.output, undefined);
    assert.ok(res.outputBytes.length > 100 * 1024, `output is ${res.outputBytes.length} bytes`);
    assert.equal(res.outputBytes.length, res.record.output_ref.size);
    assert.equal((res.output as { input: { big: string } }).input.big, big);
    const again = await c.output(res.record.request_id);
    assert.deepEqual(again, res.outputBytes);
  });

  it("resolves after retries (flaky succeeds on attempt 3)", async () => {
    const res = await client().run({ persona: "flaky", task_id: taskId("flaky") });
    assert.equal(res.record.attempts, 3);
  });

  it("waits until the step deadline the server computed, not a fixed time", async () => {
    // 4 attempts of 1.5 s: longer than the 5 s grace alone.
    const req = { persona: "slowpoke", task_id: taskId("budget"), policy_overrides: { max_attempts: 4, attempt_timeout_ms: 1500 } };
    const t0 = Date.now();
    const err = await client().run(req).catch((e: unknown) => e);
    assert.ok(err instanceof BlockedError, `got ${String(err)}`);
    assert.equal(err.record.reason, "exhausted");
    assert.ok(Date.now() - t0 > 6000, `ended after ${Date.now() - t0} ms`);
  });

  it("rejects with a StepDeadlineError without a record when none came by the deadline and the grace", async () => {
    const c = client({ graceMs: 300 });
    const sub = await c.submit({ persona: "slowpoke", task_id: taskId("nowait") });
    const err = await c.wait(sub.request_id, { deadline: new Date() }).catch((e: unknown) => e);
    assert.ok(err instanceof StepDeadlineError, `got ${String(err)}`);
    assert.equal(err.record, undefined);
    assert.equal(err.requestId, sub.request_id);
  });

  const stops: [string, PersonaRequest, Function, string, string][] = [
    ["a terminal failure", { persona: "terminal", task_id: "" }, BlockedError, "quarantined", "terminal"],
    ["retries exhausted", { persona: "slowpoke", task_id: "" }, BlockedError, "quarantined", "exhausted"],
    ["a budget spent", { persona: "flaky", task_id: "", budget: { max_tokens: 2000 } }, BudgetExhaustedError, "quarantined", "budget_exhausted"],
    ["a plateau", { persona: "plateau", task_id: "", agents: { primary: "agent-a", fallback: "agent-b" }, progress_total: 9 }, DeferredError, "deferred", "deferred"],
    ["zero progress", { persona: "slowpoke", task_id: "", progress_total: 3 }, EscalatedError, "escalated", "escalated"],
    ["the step deadline", { persona: "slowpoke", task_id: "", deadline: new Date(Date.now() + 1000) }, StepDeadlineError, "deadline_exceeded", "deadline_exceeded"],
  ];
  for (const [why, req, cls, outcome, reason] of stops) {
    it(`rejects with ${cls.name} on ${why}`, async () => {
      const r = { ...req, task_id: taskId(reason) };
      if (r.deadline) r.deadline = new Date(Date.now() + 1000);
      const err = await client().run(r).then(
        () => assert.fail("run resolved"),
        (e: unknown) => e,
      );
      assert.ok(err instanceof cls, `got ${String(err)}`);
      assert.ok(err instanceof StoppedError);
      assert.ok(err.record, "the error carries the terminal record");
      assert.equal(err.record.outcome, outcome);
      assert.equal(err.record.reason, reason);
      assert.equal(err.record.task_id, r.task_id);
      assert.equal(err.requestId, err.record.request_id);
      if (outcome === "quarantined") assert.ok(err.record.quarantine_seq, "a quarantine sequence");
    });
  }
});
