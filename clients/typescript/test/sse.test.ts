// The event-stream parser, fed chunk by chunk (no server needed).
import assert from "node:assert/strict";
import { test } from "node:test";
import { type SseMessage, readSse } from "../src/sse.js";

function body(chunks: string[]): ReadableStream<Uint8Array> {
  const enc = new TextEncoder();
  return new ReadableStream({
    start(c) {
      for (const ch of chunks) c.enqueue(enc.encode(ch));
      c.close();
    },
  });
}

async function parse(chunks: string[], last = ""): Promise<SseMessage[]> {
  const out: SseMessage[] = [];
  for await (const m of readSse(body(chunks), last)) out.push(m);
  return out;
}

test("events split anywhere, with CRLF, CR and LF line ends", async () => {
  const text = "event: attempt\r\nid: 7\r\ndata: {\"a\":1}\r\n\r\n: keep-alive\n\nevent: terminal\rid: terminal\rdata: x\rdata: y\r\r";
  const whole = await parse([text]);
  assert.deepEqual(whole, [
    { event: "attempt", data: '{"a":1}', id: "7" },
    { event: "terminal", data: "x\ny", id: "terminal" },
  ]);
  for (let i = 1; i < text.length; i++) {
    assert.deepEqual(await parse([text.slice(0, i), text.slice(i)]), whole, `split at ${i}`);
  }
});

test("a multi-byte character split between chunks is decoded whole", async () => {
  const enc = new TextEncoder().encode("data: é\n\n");
  const stream = new ReadableStream<Uint8Array>({
    start(c) {
      c.enqueue(enc.slice(0, 7));
      c.enqueue(enc.slice(7));
      c.close();
    },
  });
  const got: SseMessage[] = [];
  for await (const m of readSse(stream)) got.push(m);
  assert.deepEqual(got, [{ event: "message", data: "é", id: "" }]);
});

test("the last event id carries over; an event cut off by the end is not dispatched", async () => {
  const got = await parse(["id: 3\ndata: a\n\ndata: b\n\ndata: cut"], "1");
  assert.deepEqual(got, [
    { event: "message", data: "a", id: "3" },
    { event: "message", data: "b", id: "3" },
  ]);
});

test("fields without a colon or value, and unknown fields", async () => {
  const got = await parse(["data\nretry: 10\nfoo: bar\ndata:x\n\nid\nevent:e\ndata: 1\n\n"], "9");
  assert.deepEqual(got, [
    { event: "message", data: "\nx", id: "9" },
    { event: "e", data: "1", id: "" },
  ]);
});
