// The HTTP transport: one fetch with the token, problems turned into
// ApiErrors, and reconnects with backoff on network errors and 502/503/504.
import { ApiError, ConnectionError, UnavailableError, apiError } from "./errors.js";
import { type Backoff, abortReason, backoffDelay, parseRetryAfter, sleep } from "./retry.js";
import type { Problem } from "./types.js";

/** One HTTP call. */
export interface Call {
  method: "GET" | "POST";
  path: string;
  query?: Record<string, string | undefined>;
  body?: unknown;
  headers?: Record<string, string>;
  signal?: AbortSignal;
  /** Reconnect until this time (ms since the epoch). Default: now + backoff.maxElapsedMs. */
  reconnectUntil?: number;
  /** Called before each try (0 first, then 1, 2 … for the reconnects). */
  onTry?: (n: number) => void;
}

/** Statuses a load balancer or a restarting API answers with: retried. */
const RETRIED_STATUSES = new Set([502, 503, 504]);

/** Sends calls to one personaq API. */
export class Transport {
  constructor(
    readonly baseUrl: string,
    private readonly token: string | undefined,
    private readonly backoff: Backoff,
    private readonly fetchFn: typeof fetch,
  ) {}

  /**
   * Sends call and hands the 2xx response to read, both inside the reconnect
   * loop: a connection dropped while the body is read is retried too (every
   * call the client makes is safe to repeat).
   */
  async send<T>(call: Call, read: (res: Response) => Promise<T>): Promise<T> {
    const until = call.reconnectUntil ?? Date.now() + this.backoff.maxElapsedMs;
    for (let n = 0; ; n++) {
      let failure: unknown;
      try {
        call.onTry?.(n);
        const res = await this.fetchOnce(call);
        if (res.ok) return await read(res);
        failure = await problemError(res);
      } catch (err) {
        if (call.signal?.aborted) throw abortReason(call.signal);
        if (!isNetworkError(err)) throw err;
        failure = err;
      }
      if (failure instanceof ApiError && !RETRIED_STATUSES.has(failure.status)) throw failure;
      const left = until - Date.now();
      if (left <= 0) throw giveUp(call, failure);
      const retryAfter = failure instanceof UnavailableError ? failure.retryAfterMs : undefined;
      await sleep(Math.min(backoffDelay(this.backoff, n, retryAfter), left), call.signal);
    }
  }

  /** Sends call once, without reconnecting; the caller reads the response. */
  fetchOnce(call: Call): Promise<Response> {
    const headers: Record<string, string> = { Accept: "application/json", ...call.headers };
    if (this.token) headers.Authorization = `Bearer ${this.token}`;
    let body: string | undefined;
    if (call.body !== undefined) {
      headers["Content-Type"] = "application/json";
      body = JSON.stringify(call.body);
    }
    return this.fetchFn(this.url(call.path, call.query), { method: call.method, headers, body, signal: call.signal });
  }

  /** The absolute URL of an API path (starting with /v1). */
  url(path: string, query?: Record<string, string | undefined>): string {
    const u = new URL(this.baseUrl + path);
    for (const [k, v] of Object.entries(query ?? {})) if (v !== undefined && v !== "") u.searchParams.set(k, v);
    return u.toString();
  }
}

/** Reads an error response into the ApiError for its problem. */
export async function problemError(res: Response): Promise<ApiError> {
  const text = await res.text().catch(() => "");
  let problem: Problem | undefined;
  try {
    const v: unknown = JSON.parse(text);
    if (v && typeof v === "object" && typeof (v as Problem).type === "string") problem = v as Problem;
  } catch {
    // not JSON: a proxy's page; described below
  }
  problem ??= { type: "about:blank", title: res.statusText, status: res.status, detail: text.slice(0, 300) || res.statusText };
  return apiError(res.status, problem, parseRetryAfter(res.headers.get("Retry-After")));
}

/** fetch rejects with a TypeError when the connection fails or drops. */
export function isNetworkError(err: unknown): boolean {
  return err instanceof TypeError || err instanceof ConnectionError;
}

function giveUp(call: Call, failure: unknown): unknown {
  if (failure instanceof ApiError) return failure;
  const why = failure instanceof Error ? (failure.cause instanceof Error ? failure.cause.message : failure.message) : String(failure);
  return new ConnectionError(`personaq API unreachable: ${call.method} ${call.path}: ${why}`, { cause: failure });
}
