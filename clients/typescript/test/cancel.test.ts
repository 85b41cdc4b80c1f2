// The cancel routes (reserved by the API contract, served once the
// cancellation work lands): run only with PERSONAQ_TEST_CANCEL=1.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { CancelledError, StoppedError } from "../src/index.js";
import { client, noLive, taskId } from "./live.js";

const skip = noLive || (process.env.PERSONAQ_TEST_CANCEL === "1" ? false : "PERSONAQ_TEST_CANCEL is not 1: the cancel routes are not served yet");

describe("cancel", { skip, concurrency: true, timeout: 120_000 }, () => {
  it("cancels a request: run rejects with CancelledError carrying the record", async () => {
    const c = client();
    const task = taskId("cancel");
    const sub = await c.submit({ persona: "slowpoke", task_id: task });
    const running = c.wait(sub.request_id, { deadline: sub.deadline }).catch((e: unknown) => e);
    await new Promise((r) => setTimeout(r, 300));
    await c.cancel(sub.request_id, { reason: "the orchestrator gave up" });
    const err = await running;
    assert.ok(err instanceof CancelledError, `got ${String(err)}`);
    assert.ok(err instanceof StoppedError);
    assert.equal(err.record.outcome, "cancelled");
    assert.equal(err.record.request_id, sub.request_id);
  });

  it("cancels every request of a task", async () => {
    const c = client();
    const task = taskId("cancel-task");
    const subs = await Promise.all(["a", "b"].map((step) => c.submit({ persona: "slowpoke", task_id: task, step })));
    await c.cancelTask(task, { reason: "task abandoned" });
    for (const s of subs) {
      const st = await c.result(s.request_id, { wait: 30_000 });
      assert.equal(st.status, "cancelled");
    }
  });
});
