// Errors: a request that ended without succeeding (StoppedError and its
// subclasses, mirroring the Go client's ErrBlocked, ErrDeferred,
// ErrEscalated, ErrStepDeadline, ErrBudgetExhausted) and an API answer that
// is a problem (ApiError and its subclasses, mapped on the problem type).
import type { Problem, RequestStatus, TerminalRecord } from "./types.js";

const PROBLEM = "urn:personaq:problem:";

/**
 * A request that ended without succeeding. `record` is its terminal record
 * (reason, quarantine sequence, attempts, last error, usage); it is absent
 * only on a StepDeadlineError raised because the client's own wait ran past
 * the step deadline (plus grace) without a record.
 */
export class StoppedError extends Error {
  readonly record: TerminalRecord | undefined;
  readonly requestId: string;

  constructor(record: TerminalRecord | undefined, message?: string, requestId?: string) {
    super(message ?? (record ? stoppedMessage(record) : "request stopped"));
    this.name = new.target.name;
    this.record = record;
    this.requestId = record?.request_id ?? requestId ?? "";
  }
}

/** Quarantined: retries exhausted, a terminal failure, an invalid message. */
export class BlockedError extends StoppedError {
  declare readonly record: TerminalRecord;
}

/** Quarantined because another attempt would overspend the request's budget. */
export class BudgetExhaustedError extends BlockedError {}

/** The persona plateaued at the same point across agents (adaptive retry). */
export class DeferredError extends StoppedError {
  declare readonly record: TerminalRecord;
}

/** Retries ran out without a plateau; someone should look. */
export class EscalatedError extends StoppedError {
  declare readonly record: TerminalRecord;
}

/** The step deadline passed before the request ended. */
export class StepDeadlineError extends StoppedError {}

/** The request was cancelled through the cancel routes. */
export class CancelledError extends StoppedError {
  declare readonly record: TerminalRecord;
}

/** The StoppedError for a terminal record that is not a success. */
export function stoppedError(record: TerminalRecord): StoppedError {
  switch (record.outcome) {
    case "deferred":
      return new DeferredError(record);
    case "escalated":
      return new EscalatedError(record);
    case "deadline_exceeded":
      return new StepDeadlineError(record);
    case "cancelled":
      return new CancelledError(record);
  }
  if (record.reason === "budget_exhausted") return new BudgetExhaustedError(record);
  return new BlockedError(record);
}

function stoppedMessage(r: TerminalRecord): string {
  const kind: Record<string, string> = {
    deferred: "deferred",
    escalated: "escalated",
    deadline_exceeded: "past its step deadline",
    cancelled: "cancelled",
  };
  let msg = `task ${r.task_id} step ${r.step} ${kind[r.outcome] ?? "blocked"}: ${r.reason ?? r.outcome} after ${r.attempts} attempt(s)`;
  if (r.quarantine_seq) msg += ` (quarantine seq ${r.quarantine_seq})`;
  if (r.last_error) msg += `: ${r.last_error}`;
  else if (r.detail) msg += `: ${r.detail}`;
  return msg;
}

/** An API answer that is an error: the HTTP status and the problem. */
export class ApiError extends Error {
  readonly status: number;
  readonly problem: Problem;

  constructor(status: number, problem: Problem) {
    super(`personaq API ${status}: ${problem.detail ?? problem.title ?? problem.type}`);
    this.name = new.target.name;
    this.status = status;
    this.problem = problem;
  }

  /** The problem's field (JSON name or query parameter), when it names one. */
  get field(): string | undefined {
    return problemString(this.problem.field);
  }
}

/** 401: the token is missing or wrong. */
export class UnauthorizedError extends ApiError {}

/** 403: the token lacks the scope the route needs. */
export class ForbiddenError extends ApiError {
  /** The missing scope. */
  get scope(): string | undefined {
    return problemString(this.problem.scope);
  }
}

/** 404: no such request, or (problem type no-output) it has no output. */
export class NotFoundError extends ApiError {}

/** 409: the request id was already used with different content (from cancel: AlreadyEndedError). */
export class ConflictError extends ApiError {
  /** The stored request's status. */
  get request(): RequestStatus | undefined {
    return this.problem.request;
  }
}

/**
 * 409 from cancel: the request had already ended another way, and keeps
 * its record. `request` is its status, `record` the terminal record that
 * won (e.g. the succeeded one).
 */
export class AlreadyEndedError extends ConflictError {
  /** The terminal record the request ended with. */
  get record(): TerminalRecord | undefined {
    return this.request?.record;
  }
}

/** 422: no replica serves the persona. */
export class UnknownPersonaError extends ApiError {
  /** The personas that are served. */
  get servedPersonas(): string[] {
    return Array.isArray(this.problem.served_personas) ? this.problem.served_personas : [];
  }
}

/** 400 (invalid JSON, field or query) or 413 (too large): `field` names the culprit. */
export class InvalidRequestError extends ApiError {}

/** 503: NATS is unreachable (the client retries these before giving up). */
export class UnavailableError extends ApiError {
  /** The Retry-After the server sent, in milliseconds. */
  readonly retryAfterMs: number | undefined;

  constructor(status: number, problem: Problem, retryAfterMs?: number) {
    super(status, problem);
    this.retryAfterMs = retryAfterMs;
  }
}

/** The API could not be reached (after the client's reconnects). */
export class ConnectionError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = "ConnectionError";
  }
}

type ApiErrorClass = new (status: number, problem: Problem) => ApiError;

const bySlug: Record<string, ApiErrorClass> = {
  unauthorized: UnauthorizedError,
  forbidden: ForbiddenError,
  "not-found": NotFoundError,
  "no-output": NotFoundError,
  conflict: ConflictError,
  "unknown-persona": UnknownPersonaError,
  "invalid-json": InvalidRequestError,
  "invalid-field": InvalidRequestError,
  "invalid-query": InvalidRequestError,
  "too-large": InvalidRequestError,
  unavailable: UnavailableError,
};

const byStatus: Record<number, ApiErrorClass> = {
  400: InvalidRequestError,
  401: UnauthorizedError,
  403: ForbiddenError,
  404: NotFoundError,
  409: ConflictError,
  413: InvalidRequestError,
  422: UnknownPersonaError,
  503: UnavailableError,
};

/** The ApiError for a problem, chosen by its type (by the status when the type is not personaq's). */
export function apiError(status: number, problem: Problem, retryAfterMs?: number): ApiError {
  const slug = problem.type.startsWith(PROBLEM) ? problem.type.slice(PROBLEM.length) : "";
  const cls = bySlug[slug] ?? (slug === "" ? byStatus[status] : undefined) ?? ApiError;
  if (cls === UnavailableError) return new UnavailableError(status, problem, retryAfterMs);
  return new cls(status, problem);
}

function problemString(v: unknown): string | undefined {
  return typeof v === "string" ? v : undefined;
}
