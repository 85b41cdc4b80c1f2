// Abortable waits, combined abort signals and the reconnect backoff.

/** How the client reconnects after a network error or a 503. */
export interface RetryOptions {
  /** First delay. Default: 200 ms. */
  initialDelayMs?: number;
  /** Largest delay (a 503's Retry-After is honoured up to it). Default: 5 s. */
  maxDelayMs?: number;
  /**
   * How long a call that is not waiting (submit, output, list…) keeps
   * reconnecting before it fails. Waits (result, run, events) reconnect until
   * their own end. Default: 30 s.
   */
  maxElapsedMs?: number;
}

/** RetryOptions with every default filled in. */
export type Backoff = Required<RetryOptions>;

/** Fills in RetryOptions' defaults. */
export function backoffWithDefaults(o: RetryOptions = {}): Backoff {
  return {
    initialDelayMs: o.initialDelayMs ?? 200,
    maxDelayMs: o.maxDelayMs ?? 5000,
    maxElapsedMs: o.maxElapsedMs ?? 30000,
  };
}

/** The delay before reconnect number n (0-based): doubling, jittered ±20 %, capped. */
export function backoffDelay(b: Backoff, n: number, retryAfterMs?: number): number {
  if (retryAfterMs !== undefined && retryAfterMs >= 0) return Math.min(retryAfterMs, b.maxDelayMs);
  const base = Math.min(b.initialDelayMs * 2 ** Math.min(n, 20), b.maxDelayMs);
  return Math.round(base * (0.8 + 0.4 * Math.random()));
}

/** The reason signal was aborted with (an AbortError DOMException by default). */
export function abortReason(signal: AbortSignal): unknown {
  return signal.reason ?? new DOMException("This operation was aborted", "AbortError");
}

/** Resolves after ms, or rejects with the abort reason when signal aborts first. */
export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(abortReason(signal));
    const onAbort = () => {
      clearTimeout(timer);
      reject(abortReason(signal as AbortSignal));
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener("abort", onAbort);
      resolve();
    }, Math.max(0, ms));
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}

/** A signal that aborts when any given one does; release() detaches it. */
export interface LinkedSignal {
  signal: AbortSignal;
  abort(reason?: unknown): void;
  release(): void;
}

/** Links an AbortController to the given signals (undefined ones ignored). */
export function linkSignals(...signals: (AbortSignal | undefined)[]): LinkedSignal {
  const ctl = new AbortController();
  const detach: (() => void)[] = [];
  for (const s of signals) {
    if (!s) continue;
    if (s.aborted) {
      ctl.abort(abortReason(s));
      break;
    }
    const f = () => ctl.abort(abortReason(s));
    s.addEventListener("abort", f, { once: true });
    detach.push(() => s.removeEventListener("abort", f));
  }
  return {
    signal: ctl.signal,
    abort: (reason?: unknown) => ctl.abort(reason),
    release: () => detach.forEach((d) => d()),
  };
}

/** Parses a Retry-After header (seconds or an HTTP date) into milliseconds. */
export function parseRetryAfter(v: string | null): number | undefined {
  if (!v) return undefined;
  const secs = Number(v);
  if (Number.isFinite(secs)) return Math.max(0, secs * 1000);
  const at = Date.parse(v);
  return Number.isNaN(at) ? undefined : Math.max(0, at - Date.now());
}
