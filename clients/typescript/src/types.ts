// Wire types of the personaq HTTP API v1. Field names are the JSON names
// (snake_case), the same schema as the NATS wire format.

/** Any JSON value. */
export type Json = null | boolean | number | string | Json[] | { [key: string]: Json };

/** Where a request ended. `cancelled` comes from the cancel routes. */
export type Outcome =
  | "succeeded"
  | "quarantined"
  | "deferred"
  | "escalated"
  | "deadline_exceeded"
  | "cancelled";

/** A request's status: in flight, or its terminal outcome. */
export type Status = "queued" | "running" | "retrying" | Outcome;

/** The statuses that end a request. */
export const TERMINAL_STATUSES: readonly Status[] = [
  "succeeded",
  "quarantined",
  "deferred",
  "escalated",
  "deadline_exceeded",
  "cancelled",
];

/** Reports whether status ends the request. */
export function isTerminal(status: Status): status is Outcome {
  return TERMINAL_STATUSES.includes(status);
}

/** The agent that runs odd attempts (primary) and even ones (fallback). */
export interface Agents {
  primary: string;
  fallback?: string;
}

/** Inline changes to the named policy, for one request. */
export interface PolicyOverrides {
  max_attempts?: number;
  attempt_timeout_ms?: number;
  backoff_ms?: number[];
  non_retryable?: string[];
}

/** What one request may spend across all its attempts. */
export interface Budget {
  max_tokens?: number;
  max_cost_usd?: number;
}

/** What attempts consumed at their model provider. */
export interface Usage {
  input_tokens: number;
  output_tokens: number;
  cost_usd?: number;
}

/** tasks_completed / tasks_total as a persona reports it. */
export interface Progress {
  completed: number;
  total: number;
}

/**
 * A persona request as POST /v1/requests takes it. `persona` and `task_id`
 * are required; `request_id` defaults to a new UUID (made by the client, so a
 * resubmit after a lost answer is idempotent), `step` to "main", `deadline`
 * (the step deadline) to now + the persona's step budget.
 */
export interface PersonaRequest {
  persona: string;
  task_id: string;
  step?: string;
  input?: Json;
  request_id?: string;
  agents?: Agents;
  policy?: string;
  policy_overrides?: PolicyOverrides;
  progress_total?: number;
  correlation_id?: string;
  budget?: Budget;
  /** The step deadline: RFC 3339 text or a Date. */
  deadline?: string | Date;
  created_at?: string;
  schema_version?: number;
}

/** Where an output too large to keep inline is stored. */
export interface ObjectRef {
  bucket: string;
  name: string;
  size: number;
  digest: string;
}

/** A request's terminal record, written once. */
export interface TerminalRecord {
  schema_version: number;
  request_id: string;
  task_id: string;
  step: string;
  persona: string;
  outcome: Outcome;
  reason?: string;
  attempts: number;
  agent?: string;
  progress?: Progress;
  last_error?: string;
  duration_ms: number;
  correlation_id?: string;
  quarantine_seq?: number;
  at: string;
  detail?: string;
  blocked?: boolean;
  /** The persona's answer when kept inline (any JSON). */
  output?: Json;
  /** Set when the answer is in the object store: read it with Client.output. */
  output_ref?: ObjectRef;
  submitted_at?: string;
  usage?: Usage;
  /** Who cancelled a cancelled request (the API token's name, "cli", "console" …); `detail` is the reason they gave. */
  cancelled_by?: string;
}

/** GET /v1/requests/{id}, and the body of a submit. */
export interface RequestStatus {
  request_id: string;
  status: Status;
  persona: string;
  task_id: string;
  step: string;
  attempts: number;
  deadline?: string;
  created_at?: string;
  next_attempt_at?: string;
  last_error?: string;
  /** Only when terminal. */
  record?: TerminalRecord;
}

/** The answer of cancelTask: what POST /v1/tasks/{task_id}/cancel did. */
export interface TaskCancel {
  task_id: string;
  /** The task's requests this call cancelled: statuses whose record is the cancelled one. */
  cancelled: RequestStatus[];
  /** Open requests that ended another way before their cancel was stored; they keep that record. */
  already_ended: RequestStatus[];
}

/** One attempt of a request as it happens. */
export interface AttemptEvent {
  schema_version: number;
  request_id: string;
  task_id: string;
  step: string;
  persona: string;
  kind: "queued" | "started" | "failed" | "cancelled" | string;
  attempt: number;
  max_attempts?: number;
  agent?: string;
  class?: string;
  error?: string;
  progress?: Progress;
  duration_ms?: number;
  next_attempt?: number;
  next_agent?: string;
  next_delay_ms?: number;
  correlation_id?: string;
  at: string;
  usage?: Usage;
}

/** One event of GET /v1/requests/{id}/events. */
export type RequestEvent =
  | { type: "attempt"; id: string; attempt: AttemptEvent }
  | { type: "terminal"; id: string; status: RequestStatus };

/**
 * A piece of a running request's live output: text one attempt wrote while
 * it worked. An attempt's chunks come in order; their `data` put together
 * is what it wrote, up to the cap. Live output is for watching: the
 * terminal record still holds the output a caller acts on.
 */
export interface OutputChunk {
  schema_version: number;
  request_id: string;
  /** The attempt that wrote it (1, 2, …). */
  attempt: number;
  /** UTF-8 bytes of this attempt's output before `data`: a reader holding fewer missed a chunk. */
  offset: number;
  /** The text (empty on markers). */
  data: string;
  /** Bytes of this attempt's output dropped over the cap so far: on the one marker sent when the cap is crossed, and on the final chunk. */
  truncated?: number;
  /** The attempt's last chunk (its persona returned). */
  final?: boolean;
  /** On the marker that opens a retry: the output of every attempt up to this one is void. */
  supersedes?: number;
  at: string;
}

/**
 * One item of Client.liveOutput: a chunk (`output`), or a retry starting
 * over (`output_superseded`: discard what you show of attempts up to
 * `supersedes`; `attempt`'s chunks follow). `id` resumes after it.
 */
export type LiveOutputEvent =
  | { type: "output"; id: string; chunk: OutputChunk }
  | { type: "output_superseded"; id: string; attempt: number; supersedes: number; chunk: OutputChunk };

/** A served persona and its policy summary. */
export interface Persona {
  name: string;
  policy: string;
  max_attempts: number;
  attempt_timeout_ms: number;
  schedule: string;
  step_budget_ms: number;
  replicas: number;
}

/** An RFC 9457 problem, with personaq's extensions. */
export interface Problem {
  type: string;
  title?: string;
  status?: number;
  detail?: string;
  field?: string;
  scope?: string;
  limit_bytes?: number;
  served_personas?: string[];
  request?: RequestStatus;
  [extension: string]: unknown;
}
