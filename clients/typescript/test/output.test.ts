// Live output against the live personaq: the harness's streaming personas
// (streamer plays the script in its input, reviewer streams two lines),
// paced by gates the tests open instead of sleeps.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import type { LiveOutputEvent } from "../src/index.js";
import { FaultProxy } from "./proxy.js";
import { client, collect, gate, liveOrigin, noStreaming, openGate, taskId, within } from "./live.js";

/** The runtime's default live output cap per attempt. */
const CAP = 1 << 20;

type Step = { text?: string; gate?: string; fill?: number; drop?: boolean };

function script(...attempts: Step[][]): { attempts: Step[][] } {
  return { attempts };
}

/** [attempt, offset, data] of the chunks that carry text. */
function texts(evs: LiveOutputEvent[]): [number, number, string][] {
  return evs.flatMap((e) => (e.type === "output" && e.chunk.data ? [[e.chunk.attempt, e.chunk.offset, e.chunk.data] as [number, number, string]] : []));
}

function shape(evs: LiveOutputEvent[]): string[] {
  return evs.flatMap((e) =>
    e.type === "output_superseded" ? [`superseded ${e.supersedes} by ${e.attempt}`] : e.chunk.data ? [`${e.chunk.attempt}:${e.chunk.data}`] : [],
  );
}

/** Each attempt's chunks start at 0 and follow each other: none lost, none twice. */
function assertContiguous(evs: LiveOutputEvent[]): void {
  const held = new Map<number, number>();
  for (const e of evs) {
    if (e.type !== "output") continue;
    assert.equal(e.chunk.offset, held.get(e.chunk.attempt) ?? 0, `attempt ${e.chunk.attempt}: chunk at ${e.chunk.offset}`);
    held.set(e.chunk.attempt, e.chunk.offset + new TextEncoder().encode(e.chunk.data).length);
  }
}

async function submit(input?: { attempts: Step[][] }, persona = "streamer"): Promise<string> {
  const sub = await client().submit({ persona, task_id: taskId("live"), ...(input ? { input } : {}) });
  return sub.request_id;
}

describe("liveOutput", { skip: noStreaming, concurrency: true, timeout: 120_000 }, () => {
  it("yields chunks in order as they are written, then ends with the status", async () => {
    const [g1, g2] = [gate(), gate()];
    const id = await submit(script([{ text: "Reading " }, { gate: g1 }, { text: "the code. " }, { gate: g2 }, { text: "Sound." }]));
    const live = client().liveOutput(id, { signal: within() });
    const evs: LiveOutputEvent[] = [];
    for await (const ev of live) {
      evs.push(ev);
      // The next text is written only once this one was seen: three chunks, not one.
      const seen = texts(evs).map((t) => t[2]).join("");
      if (seen === "Reading ") await openGate(g1);
      if (seen === "Reading the code. ") await openGate(g2);
    }
    assert.deepEqual(texts(evs), [[1, 0, "Reading "], [1, 8, "the code. "], [1, 18, "Sound."]]);
    const last = evs[evs.length - 1];
    assert.ok(last.type === "output" && last.chunk.final);
    assert.equal(evs.filter((e) => e.type === "output" && e.chunk.final).length, 1);
    assert.equal(live.status?.status, "succeeded");
    assert.equal(live.status?.record?.output, "Reading the code. Sound.");
    assert.equal(live.lastEventId, "terminal");
  });

  it("says when a retry supersedes the earlier attempt's output", async () => {
    const id = await submit(script([{ text: "First try, cut short" }, { drop: true }], [{ text: "Second try." }]));
    const live = client().liveOutput(id, { signal: within() });
    const evs = await collect(live);
    assert.deepEqual(shape(evs), ["1:First try, cut short", "superseded 1 by 2", "2:Second try."]);
    assertContiguous(evs);
    assert.equal(live.status?.record?.attempts, 2);
  });

  it("gives a caller arriving mid-stream all of it, once", async () => {
    const [g1, g2] = [gate(), gate()];
    const id = await submit(script([{ text: "one " }, { gate: g1 }, { text: "two " }, { gate: g2 }, { text: "three" }]));
    const c = client();
    const first = c.liveOutput(id, { signal: within() });
    const early: LiveOutputEvent[] = [];
    for await (const ev of first) {
      early.push(ev);
      if (texts(early).length === 1) await openGate(g1);
      if (texts(early).length === 2) break;
    }
    const late = c.liveOutput(id, { signal: within() });
    const lateEvs: LiveOutputEvent[] = [];
    const r = await late.next(); // connected: "three" is not written yet
    assert.ok(!r.done);
    lateEvs.push(r.value);
    await openGate(g2);
    for await (const ev of late) lateEvs.push(ev);
    assert.deepEqual(texts(lateEvs), [[1, 0, "one "], [1, 4, "two "], [1, 8, "three"]]);
    assertContiguous(lateEvs);
    assert.equal(late.status?.status, "succeeded");
  });

  it("resumes a dropped connection with Last-Event-ID: nothing lost, nothing twice", async () => {
    const [g1, g2] = [gate(), gate()];
    const id = await submit(script([{ text: "one " }, { gate: g1 }, { text: "two " }, { gate: g2 }, { text: "three" }]));
    const proxy = new FaultProxy(liveOrigin as string);
    // Cut after queued, started and "one " (nothing more is written before g1), then after "two ".
    proxy.cutEvents = [3, 1];
    await proxy.up();
    try {
      const live = client({ baseUrl: proxy.url }).liveOutput(id, { signal: within() });
      const evs: LiveOutputEvent[] = [];
      for await (const ev of live) {
        evs.push(ev);
        if (texts(evs).length === 1 && ev.type === "output" && ev.chunk.data) await openGate(g1);
        if (texts(evs).length === 2 && ev.type === "output" && ev.chunk.data === "two ") await openGate(g2);
      }
      assert.deepEqual(texts(evs), [[1, 0, "one "], [1, 4, "two "], [1, 8, "three"]]);
      assertContiguous(evs);
      assert.equal(new Set(evs.map((e) => e.id)).size, evs.length);
      assert.ok(proxy.lastEventIds.length >= 3, `streams opened: ${proxy.lastEventIds}`);
      assert.equal(proxy.lastEventIds[0], undefined);
      assert.ok(proxy.lastEventIds.slice(1).every((v) => v), `Last-Event-IDs ${proxy.lastEventIds}`);
      assert.equal(live.status?.status, "succeeded");
    } finally {
      await proxy.down();
    }
  });

  it("resumes after an item seen earlier", async () => {
    const id = await submit(script([{ text: "one " }, { text: "two" }, { drop: true }], [{ text: "three" }]));
    const c = client();
    const all = await collect(c.liveOutput(id, { signal: within() }));
    assert.ok(all.length >= 3);
    for (let k = 0; k < all.length; k++) {
      const rest = await collect(c.liveOutput(id, { lastEventId: all[k].id, signal: within() }));
      assert.deepEqual(rest.map((e) => e.chunk), all.slice(k + 1).map((e) => e.chunk));
    }
  });

  it("yields nothing for a persona that streams nothing, retries included", async () => {
    for (const persona of ["echo", "flaky"]) {
      const live = client().liveOutput(await submit(undefined, persona), { signal: within() });
      assert.deepEqual(await collect(live), []);
      assert.equal(live.status?.status, "succeeded");
    }
  });

  it("marks the cap once and counts what it dropped", async () => {
    const over = 10_000;
    const g = gate();
    const id = await submit(script([{ fill: CAP + over }, { gate: g }, { text: "after the cap" }]));
    const evs: LiveOutputEvent[] = [];
    let held = 0;
    for await (const ev of client().liveOutput(id, { signal: within(60_000) })) {
      evs.push(ev);
      if (ev.type !== "output") continue;
      held += ev.chunk.data.length;
      if (ev.chunk.truncated && !ev.chunk.final) await openGate(g); // the marker came: the rest is dropped too
    }
    assert.equal(held, CAP);
    assertContiguous(evs);
    const markers = evs.filter((e) => e.type === "output" && e.chunk.truncated && !e.chunk.final);
    assert.equal(markers.length, 1);
    const m = markers[0].chunk;
    assert.ok(m.data === "" && (m.truncated ?? 0) > 0 && (m.truncated ?? 0) <= over, `marker ${JSON.stringify(m)}`);
    const last = evs[evs.length - 1];
    assert.ok(last.type === "output" && last.chunk.final);
    assert.equal(last.chunk.truncated, over + "after the cap".length);
  });

  it("run's onOutput gets the chunks, events() leaves them out", async () => {
    const c = client();
    const seen: LiveOutputEvent[] = [];
    const attempts: string[] = [];
    const res = await c.run(
      { persona: "reviewer", task_id: taskId("live-run") },
      { onOutput: (e) => void seen.push(e), onEvent: (e) => void attempts.push(e.type === "attempt" ? e.attempt.kind : e.type), signal: within() },
    );
    assert.equal(res.output, "Reading the code.\nThe change is sound.");
    assert.equal(seen.map((e) => e.chunk.data).join(""), "Reading the code.\nThe change is sound.\n");
    assert.ok(attempts.includes("started"));
    const evs = await collect(c.events(res.record.request_id, { signal: within() }));
    assert.deepEqual([...new Set(evs.map((e) => e.type))].sort(), ["attempt", "terminal"]);
  });
});
