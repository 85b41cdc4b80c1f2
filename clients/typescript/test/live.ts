// Test harness: the live personaq the suite runs against (PERSONAQ_URL,
// PERSONAQ_API_TOKEN), as `personaq dev --per-persona 0 --time-scale 0.01`
// serves it.
import { Client, type ClientOptions } from "../src/index.js";

/** The live API's URL, or undefined (the live tests then skip). */
export const liveUrl = process.env.PERSONAQ_URL;

/** The live API's origin (PERSONAQ_URL without the /v1 dev prints). */
export const liveOrigin = liveUrl?.replace(/\/+$/, "").replace(/\/v1$/, "");

/** Skip text for a live test when no personaq is given. */
export const noLive = liveUrl ? false : "PERSONAQ_URL is not set: no live personaq to test against";

/** A client of the live API; options override the env defaults. */
export function client(options: ClientOptions = {}): Client {
  return new Client({ retry: { initialDelayMs: 50, maxDelayMs: 500 }, ...options });
}

let counter = 0;

/** A task id no other test (or earlier run) uses. */
export function taskId(name: string): string {
  counter++;
  return `ts-${name}-${Date.now().toString(36)}-${counter}`;
}

/** Collects an async iterable. */
export async function collect<T>(it: AsyncIterable<T>): Promise<T[]> {
  const out: T[] = [];
  for await (const v of it) out.push(v);
  return out;
}

/** Runs f and returns how long it took, in ms. */
export async function timed<T>(f: () => Promise<T>): Promise<[T | unknown, number]> {
  const t0 = Date.now();
  try {
    return [await f(), Date.now() - t0];
  } catch (err) {
    return [err, Date.now() - t0];
  }
}

/** A signal that aborts after ms: a stream the server never ends fails the test instead of hanging it. */
export function within(ms = 30_000): AbortSignal {
  const ctl = new AbortController();
  const timer: unknown = setTimeout(() => ctl.abort(new Error(`no answer within ${ms} ms`)), ms);
  (timer as { unref?: () => void }).unref?.(); // Node: the timer does not keep the test process alive
  return ctl.signal;
}

/** The gates of the harness's streaming personas (PERSONAQ_STREAM_GATES), or undefined. */
export const gatesUrl = process.env.PERSONAQ_STREAM_GATES;

/** Skip text for a test that needs the streaming personas. */
export const noStreaming = noLive || (gatesUrl ? false : "PERSONAQ_STREAM_GATES is not set: no streaming personas to test against");

/** A gate name no other test uses. */
export function gate(): string {
  return `g-${crypto.randomUUID()}`;
}

/** Opens a gate: the streaming persona waiting at it goes on. */
export async function openGate(name: string): Promise<void> {
  const res = await fetch(`${gatesUrl}/gates/${name}`, { method: "POST" });
  if (res.status !== 204) throw new Error(`open gate ${name}: ${res.status}`);
}
