// The personaq HTTP API client.
import { AlreadyEndedError, ConflictError, ConnectionError, StepDeadlineError, stoppedError } from "./errors.js";
import { type RetryOptions, abortReason, backoffDelay, backoffWithDefaults, linkSignals, sleep, type Backoff } from "./retry.js";
import { readSse } from "./sse.js";
import { Transport, isNetworkError, problemError } from "./transport.js";
import {
  type Json,
  type LiveOutputEvent,
  type OutputChunk,
  type Persona,
  type PersonaRequest,
  type RequestEvent,
  type RequestStatus,
  type Status,
  type TaskCancel,
  type TerminalRecord,
  isTerminal,
} from "./types.js";

/** Longest wait the server holds one long-poll for; longer waits loop. */
export const MAX_SERVER_WAIT_MS = 60_000;

/** How a Client reaches personaq. */
export interface ClientOptions {
  /** The API's URL, with or without the trailing /v1. Default: env PERSONAQ_URL. Required. */
  baseUrl?: string;
  /** The bearer token. Default: env PERSONAQ_API_TOKEN. */
  token?: string;
  /** How calls reconnect after network errors and 503s. Default: see RetryOptions. */
  retry?: RetryOptions;
  /** How long run waits past the step deadline for the terminal record. Default: 5 s (as the Go client). */
  graceMs?: number;
  /**
   * The longest wait one long-poll asks the server for; longer waits loop.
   * Lower it behind a proxy that cuts idle connections sooner. Default and
   * maximum: 60 s (the server's maximum).
   */
  pollMs?: number;
  /** The fetch to use. Default: the global fetch. */
  fetch?: typeof fetch;
}

/** Options every call takes. */
export interface CallOptions {
  signal?: AbortSignal;
}

/** A submit's answer: the request status, and whether this call created the request. */
export interface Submission extends RequestStatus {
  /** false when the same request_id with identical content was already accepted. */
  created: boolean;
}

/** Options of result. */
export interface ResultOptions extends CallOptions {
  /** Wait up to this long (ms) for the terminal status; longer than the server's 60 s is looped. Default: 0, no wait. */
  wait?: number;
}

/** Options of run and wait. */
export interface RunOptions extends CallOptions {
  /** Called with each attempt event (queued, started, failed …) as it happens. */
  onEvent?: (event: RequestEvent) => void;
  /** Called with each live output chunk and superseded notice as it comes (see liveOutput). */
  onOutput?: (event: LiveOutputEvent) => void;
}

/** Options of wait. */
export interface WaitOptions extends RunOptions {
  /** The step deadline (Date, RFC 3339 or ms since the epoch); waits until it plus the grace. Default: no limit. */
  deadline?: Date | string | number;
}

/** Options of events and liveOutput. */
export interface EventsOptions extends CallOptions {
  /** Resume after this event id (an event's `id`, or "terminal"). */
  lastEventId?: string;
}

/** An event of the stream, live output included. */
type StreamEvent = RequestEvent | LiveOutputEvent;

/**
 * A request's live output as it is written (Client.liveOutput): an async
 * iterator of chunks and superseded notices that ends when the request
 * does; `status` is then its terminal status, with the record.
 */
export class LiveOutput implements AsyncIterableIterator<LiveOutputEvent> {
  /** The terminal status, once the iteration ended. */
  status: RequestStatus | undefined;
  /** The id of the last event read (attempt events included): liveOutput(id, {lastEventId}) resumes after it. */
  lastEventId: string;

  constructor(
    private readonly stream: AsyncGenerator<StreamEvent>,
    lastEventId: string,
  ) {
    this.lastEventId = lastEventId;
  }

  [Symbol.asyncIterator](): LiveOutput {
    return this;
  }

  async next(): Promise<IteratorResult<LiveOutputEvent, undefined>> {
    for (;;) {
      const r = await this.stream.next();
      if (r.done) return { done: true, value: undefined };
      const ev = r.value;
      this.lastEventId = ev.id;
      if (ev.type === "terminal") {
        this.status = ev.status;
        return this.return();
      }
      if (ev.type !== "attempt") return { done: false, value: ev };
    }
  }

  /** Stops following (a `break` out of `for await` calls it): the connection is closed. */
  async return(): Promise<IteratorResult<LiveOutputEvent, undefined>> {
    await this.stream.return(undefined);
    return { done: true, value: undefined };
  }
}

/** Filters of requests. */
export interface RequestsFilter extends CallOptions {
  taskId?: string;
  persona?: string | string[];
  status?: Status | Status[];
  /** Page size (server default 50, max 500). */
  limit?: number;
}

/** Options of cancel and cancelTask. */
export interface CancelOptions extends CallOptions {
  reason?: string;
}

/** A request that succeeded: its output and terminal record. */
export interface RunResult {
  /** The persona's answer, parsed as JSON (its text when it is not JSON). */
  output: Json | undefined;
  /**
   * The answer's bytes: read from GET …/output when the record has an
   * output_ref (large outputs), else the inline output encoded as JSON.
   */
  outputBytes: Uint8Array;
  record: TerminalRecord;
}

/** A page of requests. */
interface RequestsPage {
  requests: RequestStatus[];
  next_cursor?: string;
}

/** The personaq HTTP API: submit persona requests and await their terminal records. */
export class Client {
  private readonly http: Transport;
  private readonly backoff: Backoff;
  private readonly graceMs: number;
  private readonly pollMs: number;

  constructor(options: ClientOptions = {}) {
    const env = processEnv();
    const baseUrl = options.baseUrl ?? env.PERSONAQ_URL;
    if (!baseUrl) throw new TypeError("personaq: no baseUrl given and PERSONAQ_URL is not set");
    this.backoff = backoffWithDefaults(options.retry);
    this.graceMs = options.graceMs ?? 5000;
    this.pollMs = Math.min(options.pollMs ?? MAX_SERVER_WAIT_MS, MAX_SERVER_WAIT_MS);
    const f = options.fetch ?? globalThis.fetch.bind(globalThis);
    this.http = new Transport(baseUrl.replace(/\/+$/, "").replace(/\/v1$/, ""), options.token ?? env.PERSONAQ_API_TOKEN, this.backoff, f);
  }

  /**
   * Submits a persona request; resolves once JetStream stored it. A missing
   * request_id is made here, so the reconnects after a lost answer are
   * idempotent (the server answers 200 with the first answer's body).
   */
  async submit(req: PersonaRequest, options: CallOptions = {}): Promise<Submission> {
    const body = { ...req, request_id: req.request_id ?? crypto.randomUUID() };
    if (body.deadline instanceof Date) body.deadline = body.deadline.toISOString();
    return this.http.send({ method: "POST", path: "/v1/requests", body, signal: options.signal }, async (res) => {
      const st = (await res.json()) as RequestStatus;
      return { ...st, created: res.status === 201 };
    });
  }

  /**
   * The request's status; with `wait`, long-polls until it is terminal or the
   * wait ends (looping past the server's 60 s and reconnecting while the API
   * restarts), then resolves to the status as it is.
   */
  async result(requestId: string, options: ResultOptions = {}): Promise<RequestStatus> {
    const until = Date.now() + Math.max(0, options.wait ?? 0);
    for (;;) {
      const remaining = until - Date.now();
      const wait = Math.min(remaining, this.pollMs);
      const st = await this.http.send<RequestStatus>(
        {
          method: "GET",
          path: `/v1/requests/${encodeURIComponent(requestId)}`,
          query: { wait: wait > 0 ? `${Math.ceil(wait)}ms` : undefined },
          signal: options.signal,
          reconnectUntil: Math.max(until, Date.now() + this.backoff.maxElapsedMs),
        },
        (res) => res.json(),
      );
      if (isTerminal(st.status) || until - Date.now() <= 0) return st;
    }
  }

  /**
   * Submits req and awaits its terminal record until the step deadline the
   * server returned (plus the grace). Resolves with the output when it
   * succeeded; rejects with a StoppedError subclass carrying the record
   * otherwise (BlockedError, DeferredError, EscalatedError,
   * StepDeadlineError, CancelledError).
   */
  async run(req: PersonaRequest, options: RunOptions = {}): Promise<RunResult> {
    const sub = await this.submit(req, options);
    return this.wait(sub.request_id, { ...options, deadline: sub.deadline });
  }

  /**
   * Awaits a submitted request as run does: an orchestrator that restarted
   * mid-step awaits the same request id again.
   */
  async wait(requestId: string, options: WaitOptions = {}): Promise<RunResult> {
    const until = deadlineMs(options.deadline) + this.graceMs;
    const st = options.onEvent || options.onOutput
      ? await this.waitEvents(requestId, until, options, options.signal)
      : await this.result(requestId, { wait: until - Date.now(), signal: options.signal });
    if (!st?.record) {
      throw new StepDeadlineError(
        undefined,
        `request ${requestId} has no terminal record ${this.graceMs} ms after its step deadline (status ${st?.status ?? "unknown"})`,
        requestId,
      );
    }
    if (st.record.outcome !== "succeeded") throw stoppedError(st.record);
    return this.succeeded(st.record, options.signal);
  }

  /** The output bytes of a succeeded request (any size). */
  async output(requestId: string, options: CallOptions = {}): Promise<Uint8Array> {
    return this.http.send(
      { method: "GET", path: `/v1/requests/${encodeURIComponent(requestId)}/output`, signal: options.signal },
      async (res) => new Uint8Array(await res.arrayBuffer()),
    );
  }

  /**
   * The request's events as they happen: attempt events, then one terminal
   * event with the status and record, then the end. A dropped connection is
   * resumed with Last-Event-ID (no loss, no repeat).
   */
  async *events(requestId: string, options: EventsOptions = {}): AsyncGenerator<RequestEvent> {
    for await (const ev of this.eventStream(requestId, options.lastEventId ?? "", options.signal, undefined)) {
      if (ev.type === "attempt" || ev.type === "terminal") yield ev;
    }
  }

  /**
   * The request's live output as its persona writes it: chunks in order,
   * each with its attempt and offset, and a notice when a retry supersedes
   * what earlier attempts wrote; it ends when the request does (`status`
   * is then the terminal status). A caller arriving mid-stream gets the
   * output from its start; a dropped connection is resumed with
   * Last-Event-ID (nothing lost, nothing twice). A persona that streams
   * nothing yields nothing.
   */
  liveOutput(requestId: string, options: EventsOptions = {}): LiveOutput {
    const last = options.lastEventId ?? "";
    return new LiveOutput(this.eventStream(requestId, last, options.signal, undefined), last);
  }

  /** Requests, newest first, page after page (limit is the page size). */
  async *requests(filter: RequestsFilter = {}): AsyncGenerator<RequestStatus> {
    let cursor: string | undefined;
    do {
      const page: RequestsPage = await this.http.send(
        {
          method: "GET",
          path: "/v1/requests",
          query: {
            task_id: filter.taskId,
            persona: list(filter.persona),
            status: list(filter.status),
            limit: filter.limit?.toString(),
            cursor,
          },
          signal: filter.signal,
        },
        (res) => res.json(),
      );
      for (const r of page.requests) yield r;
      cursor = page.next_cursor;
    } while (cursor);
  }

  /** The served personas, their policy summary and step budget. */
  async personas(options: CallOptions = {}): Promise<Persona[]> {
    const body: { personas: Persona[] } = await this.http.send(
      { method: "GET", path: "/v1/personas", signal: options.signal },
      (res) => res.json(),
    );
    return body.personas;
  }

  /**
   * Cancels a request (scope cancel): queued, it never runs; waiting for a
   * retry, it runs no further attempt; running, its attempt is stopped.
   * Resolves to its status, whose record is the cancelled one (`detail` is
   * the reason, `cancelled_by` the token's name). Rejects with
   * AlreadyEndedError (a ConflictError) carrying the record that won when
   * the request had already ended (a call repeated after a lost answer
   * resolves to the cancelled status its first try stored instead),
   * NotFoundError for an unknown id, ForbiddenError without the scope.
   */
  async cancel(requestId: string, options: CancelOptions = {}): Promise<RequestStatus> {
    let retried = false;
    try {
      return await this.http.send(
        {
          method: "POST",
          path: `/v1/requests/${encodeURIComponent(requestId)}/cancel`,
          body: cancelBody(options),
          signal: options.signal,
          onTry: (n) => void (retried = n > 0),
        },
        (res) => res.json(),
      );
    } catch (err) {
      if (!(err instanceof ConflictError)) throw err;
      const ended = new AlreadyEndedError(err.status, err.problem);
      // A try that got no answer may have stored the cancel: a repeat then meets its own record.
      if (retried && ended.record?.outcome === "cancelled" && ended.request) return ended.request;
      throw ended;
    }
  }

  /**
   * Cancels every open request of a task, whatever its persona or step
   * (scope cancel). Resolves to the statuses it cancelled and those of
   * requests that had ended another way first.
   */
  async cancelTask(taskId: string, options: CancelOptions = {}): Promise<TaskCancel> {
    return this.http.send(
      { method: "POST", path: `/v1/tasks/${encodeURIComponent(taskId)}/cancel`, body: cancelBody(options), signal: options.signal },
      (res) => res.json(),
    );
  }

  private async succeeded(record: TerminalRecord, signal?: AbortSignal): Promise<RunResult> {
    if (!record.output_ref) {
      const output = record.output;
      const outputBytes = new TextEncoder().encode(output === undefined ? "" : JSON.stringify(output));
      return { output, outputBytes, record };
    }
    const outputBytes = await this.output(record.request_id, { signal });
    return { output: parseOutput(outputBytes), outputBytes, record };
  }

  /** Waits through the event stream, calling onEvent and onOutput, until the terminal event or until. */
  private async waitEvents(requestId: string, until: number, on: RunOptions, signal?: AbortSignal): Promise<RequestStatus | undefined> {
    const link = linkSignals(signal);
    const timedOut = new Error("wait ended");
    const timer = Number.isFinite(until) ? setTimeout(() => link.abort(timedOut), Math.max(0, until - Date.now())) : undefined;
    try {
      for await (const ev of this.eventStream(requestId, "", link.signal, until)) {
        if (ev.type === "terminal") return ev.status;
        if (ev.type === "attempt") on.onEvent?.(ev);
        else on.onOutput?.(ev);
      }
      return undefined;
    } catch (err) {
      if (err === timedOut) return undefined;
      throw err;
    } finally {
      clearTimeout(timer);
      link.release();
    }
  }

  private async *eventStream(requestId: string, lastEventId: string, signal: AbortSignal | undefined, until: number | undefined): AsyncGenerator<StreamEvent> {
    let last = lastEventId;
    let failingSince: number | undefined;
    for (let n = 0; ; n++) {
      let delay = backoffDelay(this.backoff, n);
      try {
        const res = await this.http.fetchOnce({
          method: "GET",
          path: `/v1/requests/${encodeURIComponent(requestId)}/events`,
          headers: { Accept: "text/event-stream", ...(last ? { "Last-Event-ID": last } : {}) },
          signal,
        });
        if (!res.ok) throw await problemError(res);
        if (!res.body) throw new TypeError("event stream without a body");
        for await (const msg of readSse(res.body, last)) {
          failingSince = undefined;
          n = 0;
          last = msg.id;
          if (msg.event === "attempt") yield { type: "attempt", id: msg.id, attempt: JSON.parse(msg.data) };
          if (msg.event === "output") yield { type: "output", id: msg.id, chunk: JSON.parse(msg.data) };
          if (msg.event === "output_superseded") {
            const chunk: OutputChunk = JSON.parse(msg.data);
            yield { type: "output_superseded", id: msg.id, attempt: chunk.attempt, supersedes: chunk.supersedes ?? chunk.attempt - 1, chunk };
          }
          if (msg.event === "terminal") {
            yield { type: "terminal", id: msg.id, status: JSON.parse(msg.data) };
            return;
          }
        }
        // The stream ended before the terminal event (the API restarted): resume.
      } catch (err) {
        if (signal?.aborted) throw abortReason(signal);
        if (!retriable(err)) throw err;
        failingSince ??= Date.now();
        const left = (until ?? failingSince + this.backoff.maxElapsedMs) - Date.now();
        if (left <= 0) throw err instanceof TypeError ? new ConnectionError(`personaq API unreachable: events of ${requestId}: ${err.message}`, { cause: err }) : err;
        delay = Math.min(backoffDelay(this.backoff, n, (err as { retryAfterMs?: number }).retryAfterMs), left);
      }
      await sleep(delay, signal);
    }
  }
}

function retriable(err: unknown): boolean {
  if (isNetworkError(err)) return true;
  const status = (err as { status?: unknown }).status;
  return status === 502 || status === 503 || status === 504;
}

function processEnv(): Record<string, string | undefined> {
  const p = (globalThis as { process?: { env?: Record<string, string | undefined> } }).process;
  return p?.env ?? {};
}

function deadlineMs(d: Date | string | number | undefined): number {
  if (d === undefined || d === "") return Infinity;
  const ms = d instanceof Date ? d.getTime() : typeof d === "number" ? d : Date.parse(d);
  return Number.isNaN(ms) ? Infinity : ms;
}

/** The cancel routes' body: the reason when there is one. */
function cancelBody(options: CancelOptions): { reason?: string } {
  return options.reason ? { reason: options.reason } : {};
}

function list(v: string | string[] | undefined): string | undefined {
  return Array.isArray(v) ? v.join(",") : v;
}

function parseOutput(bytes: Uint8Array): Json {
  const text = new TextDecoder().decode(bytes);
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}
