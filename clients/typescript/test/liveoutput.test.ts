// liveOutput over a scripted event stream (no server): typed items,
// attempt events left out, a dropped stream resumed after the last event
// whatever its kind, the terminal status on the iterator.
import assert from "node:assert/strict";
import { test } from "node:test";
import { Client } from "../src/index.js";

const chunk = (attempt: number, offset: number, data: string, extra = "") =>
  `{"schema_version":1,"request_id":"r1","attempt":${attempt},"offset":${offset},"data":${JSON.stringify(data)}${extra},"at":"2026-11-27T03:04:05.006Z"}`;

const streams = [
  `event: attempt\nid: 1\ndata: {"kind":"started","attempt":1}\n\nevent: output\nid: 1.1\ndata: ${chunk(1, 0, "Hé, ")}\n\n`,
  `event: attempt\nid: 3.1\ndata: {"kind":"failed","attempt":1}\n\nevent: output_superseded\nid: 3.2\ndata: ${chunk(2, 0, "", ',"supersedes":1')}\n\n`,
  `event: output\nid: 3.3\ndata: ${chunk(2, 0, "again", ',"final":true')}\n\nevent: terminal\nid: terminal\ndata: {"request_id":"r1","status":"succeeded","persona":"p","task_id":"t","step":"main","attempts":2}\n\n`,
];

/** A fetch serving the scripted streams one after the other, recording Last-Event-ID. */
function scripted(seen: (string | null)[]): typeof fetch {
  let n = 0;
  return async (_input, init) => {
    seen.push(new Headers(init?.headers).get("Last-Event-ID"));
    const text = streams[Math.min(n++, streams.length - 1)];
    return new Response(text, { status: 200, headers: { "Content-Type": "text/event-stream" } });
  };
}

test("liveOutput yields typed items across dropped streams, then ends with the status", async () => {
  const seen: (string | null)[] = [];
  const c = new Client({ baseUrl: "http://personaq.invalid", token: "t", fetch: scripted(seen), retry: { initialDelayMs: 1, maxDelayMs: 1 } });
  const live = c.liveOutput("r1");
  const items = [];
  for await (const ev of live) items.push(ev);
  assert.deepEqual(
    items.map((e) => (e.type === "output" ? `${e.id} ${e.chunk.attempt}@${e.chunk.offset} ${e.chunk.data}` : `${e.id} ${e.supersedes}<${e.attempt}`)),
    ["1.1 1@0 Hé, ", "3.2 1<2", "3.3 2@0 again"],
  );
  assert.deepEqual(seen, [null, "1.1", "3.2"]);
  assert.equal(live.status?.status, "succeeded");
  assert.equal(live.lastEventId, "terminal");
  assert.deepEqual(await live.next(), { done: true, value: undefined });
});

test("events leaves live output out but resumes after it", async () => {
  const seen: (string | null)[] = [];
  const c = new Client({ baseUrl: "http://personaq.invalid", token: "t", fetch: scripted(seen), retry: { initialDelayMs: 1, maxDelayMs: 1 } });
  const ids = [];
  for await (const ev of c.events("r1")) ids.push(`${ev.type} ${ev.id}`);
  assert.deepEqual(ids, ["attempt 1", "attempt 3.1", "terminal terminal"]);
  assert.deepEqual(seen, [null, "1.1", "3.2"]);
});
