// Waiting against the live personaq: long-polls looped past one poll,
// event streams and their resumption, aborts, and reconnects while the API
// is unreachable (through a fault-injecting proxy).
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { Client, ConnectionError, type RequestEvent, isTerminal } from "../src/index.js";
import { FaultProxy } from "./proxy.js";
import { client, collect, liveOrigin, noLive, taskId, timed, within } from "./live.js";

/** A fetch that counts the long-polls it sends. */
function countingFetch(): { fetch: typeof fetch; polls: () => number } {
  let n = 0;
  const f: typeof fetch = (input, init) => {
    if (String(input).includes("wait=")) n++;
    return fetch(input, init);
  };
  return { fetch: f, polls: () => n };
}

function kinds(evs: RequestEvent[]): string[] {
  return evs.map((e) => (e.type === "attempt" ? `${e.attempt.kind}:${e.attempt.attempt}` : "terminal"));
}

describe("result", { skip: noLive, concurrency: true, timeout: 120_000 }, () => {
  it("loops long-polls past one poll's wait until the record", async () => {
    const cf = countingFetch();
    const c = client({ pollMs: 400, fetch: cf.fetch });
    // slowpoke: 4 attempt timeouts of 500 ms and the backoffs between them.
    const sub = await c.submit({ persona: "slowpoke", task_id: taskId("poll") });
    const st = await c.result(sub.request_id, { wait: 30_000 });
    assert.equal(st.status, "quarantined");
    assert.equal(st.record?.reason, "exhausted");
    assert.ok(cf.polls() >= 3, `${cf.polls()} polls`);
  });

  it("answers the current status when the wait ends first", async () => {
    const c = client();
    const sub = await c.submit({ persona: "slowpoke", task_id: taskId("short") });
    const [st, ms] = await timed(() => c.result(sub.request_id, { wait: 700 }));
    assert.ok(!(st instanceof Error), String(st));
    const status = (st as { status: "queued" }).status;
    assert.ok(!isTerminal(status), `status ${status}`);
    assert.ok(ms >= 600 && ms < 5000, `returned after ${ms} ms`);
    assert.equal((st as { record?: unknown }).record, undefined);
  });
});

describe("events", { skip: noLive, concurrency: true, timeout: 120_000 }, () => {
  it("streams the attempts, then the terminal event, then ends", async () => {
    const c = client();
    const sub = await c.submit({ persona: "flaky", task_id: taskId("events") });
    const evs = await collect(c.events(sub.request_id, { signal: within() }));
    const ks = kinds(evs);
    assert.deepEqual(ks.filter((k) => !k.startsWith("queued")), ["started:1", "failed:1", "started:2", "failed:2", "started:3", "terminal"]);
    const last = evs[evs.length - 1];
    assert.ok(last.type === "terminal");
    assert.equal(last.id, "terminal");
    assert.equal(last.status.record?.outcome, "succeeded");
    // Every attempt event has its own, increasing id.
    const ids = evs.filter((e) => e.type === "attempt").map((e) => Number(e.id));
    assert.ok(ids.every((id, i) => Number.isInteger(id) && (i === 0 || id > ids[i - 1])), `ids ${ids}`);
  });

  it("resumes after a given event without loss or repeat", async () => {
    const c = client();
    const sub = await c.submit({ persona: "flaky", task_id: taskId("resume") });
    const all = await collect(c.events(sub.request_id, { signal: within() }));
    const k = 2;
    const rest = await collect(c.events(sub.request_id, { lastEventId: all[k - 1].id, signal: within() }));
    assert.deepEqual(kinds(rest), kinds(all.slice(k)));
    const again = await collect(c.events(sub.request_id, { lastEventId: "terminal", signal: within() }));
    assert.deepEqual(kinds(again), ["terminal"]);
  });

  it("reconnects with Last-Event-ID after a dropped connection", async () => {
    const proxy = new FaultProxy(liveOrigin as string);
    await proxy.up();
    try {
      const direct = client();
      const c = client({ baseUrl: proxy.url });
      const sub = await c.submit({ persona: "flaky", task_id: taskId("drop") });
      await direct.result(sub.request_id, { wait: 30_000 });
      proxy.cutEvents = [2, 1];
      const got = await collect(c.events(sub.request_id, { signal: within() }));
      const want = await collect(direct.events(sub.request_id, { signal: within() }));
      assert.deepEqual(kinds(got), kinds(want));
      assert.deepEqual(proxy.lastEventIds, [undefined, want[1].id, want[2].id]);
    } finally {
      await proxy.down();
    }
  });

  it("feeds run's onEvent as the attempts happen", async () => {
    const seen: RequestEvent[] = [];
    const res = await client().run({ persona: "validator", task_id: taskId("onevent") }, { onEvent: (e) => seen.push(e) });
    assert.equal(res.record.attempts, 2);
    assert.deepEqual(kinds(seen).filter((k) => !k.startsWith("queued")), ["started:1", "failed:1", "started:2"]);
    const failed = seen.find((e) => e.type === "attempt" && e.attempt.kind === "failed");
    assert.ok(failed?.type === "attempt" && failed.attempt.class, "a failed event says its class");
  });
});

describe("abort", { skip: noLive, concurrency: true, timeout: 120_000 }, () => {
  it("an AbortSignal ends run, result, events and a backoff promptly", async () => {
    const c = client();
    const cases: [string, (s: AbortSignal) => Promise<unknown>][] = [
      ["run", (s) => c.run({ persona: "slowpoke", task_id: taskId("abort") }, { signal: s })],
      ["run onEvent", (s) => c.run({ persona: "slowpoke", task_id: taskId("abort") }, { signal: s, onEvent: () => undefined })],
      ["result", async (s) => c.result((await c.submit({ persona: "slowpoke", task_id: taskId("abort") })).request_id, { wait: 30_000, signal: s })],
      ["events", async (s) => collect(c.events((await c.submit({ persona: "slowpoke", task_id: taskId("abort") })).request_id, { signal: s }))],
      ["backoff", (s) => new Client({ baseUrl: "http://127.0.0.1:9", retry: { initialDelayMs: 10_000 } }).personas({ signal: s })],
    ];
    await Promise.all(
      cases.map(async ([name, call]) => {
        const ctl = new AbortController();
        setTimeout(() => ctl.abort(), 300);
        const [err, ms] = await timed(() => call(ctl.signal));
        assert.ok(err instanceof DOMException && err.name === "AbortError", `${name}: got ${String(err)}`);
        assert.ok(ms < 2000, `${name}: took ${ms} ms to abort`);
      }),
    );
  });

  it("rejects with the signal's reason", async () => {
    const reason = new Error("orchestrator shutting down");
    const ctl = new AbortController();
    ctl.abort(reason);
    const [err] = await timed(() => client().run({ persona: "slowpoke", task_id: taskId("reason") }, { signal: ctl.signal }));
    assert.equal(err, reason);
  });
});

describe("reconnect", { skip: noLive, timeout: 120_000 }, () => {
  let proxy: FaultProxy;
  before(async () => {
    proxy = new FaultProxy(liveOrigin as string);
    await proxy.up();
  });
  after(() => proxy.down());

  it("a long-poll outlives the API going away and coming back", async () => {
    const c = client({ baseUrl: proxy.url });
    const sub = await c.submit({ persona: "slowpoke", task_id: taskId("restart") });
    const waiting = c.result(sub.request_id, { wait: 30_000 }).catch((e: unknown) => e);
    await new Promise((r) => setTimeout(r, 300));
    await proxy.down();
    await new Promise((r) => setTimeout(r, 1000));
    await proxy.up();
    const st = await waiting;
    assert.ok(!(st instanceof Error), `got ${String(st)}`);
    assert.equal((st as { status: string }).status, "quarantined");
    assert.ok(proxy.paths.filter((p) => p.includes(sub.request_id)).length >= 2, "the client polled again");
  });

  it("resends a submit whose answer was lost, and it is the same request", async () => {
    const c = client({ baseUrl: proxy.url });
    const task = taskId("lost");
    proxy.dropAnswers = 1;
    const sub = await c.submit({ persona: "echo", task_id: task });
    assert.equal(proxy.dropAnswers, 0);
    assert.equal(sub.created, false, "the resend found the request the lost answer was about");
    const listed = await collect(client().requests({ taskId: task }));
    assert.deepEqual(listed.map((r) => r.request_id), [sub.request_id]);
  });

  it("retries 503 Unavailable, honouring Retry-After", async () => {
    const c = client({ baseUrl: proxy.url });
    proxy.unavailable = 3;
    const ps = await c.personas();
    assert.ok(ps.length > 0);
    assert.equal(proxy.unavailable, 0);
  });
});

describe("unreachable", () => {
  it("gives up after maxElapsedMs with a ConnectionError", async () => {
    const c = new Client({ baseUrl: "http://127.0.0.1:9", retry: { initialDelayMs: 20, maxElapsedMs: 300 } });
    const [err, ms] = await timed(() => c.personas());
    assert.ok(err instanceof ConnectionError, `got ${String(err)}`);
    assert.ok(ms >= 200 && ms < 2000, `gave up after ${ms} ms`);
  });
});
