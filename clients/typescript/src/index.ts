// @personaq/client: the personaq HTTP API from TypeScript and JavaScript
// (ESM, fetch only, no runtime dependency).
export * from "./client.js";
export * from "./errors.js";
export type { RetryOptions } from "./retry.js";
export type { SseMessage } from "./sse.js";
export * from "./types.js";
