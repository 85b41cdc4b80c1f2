// The few Node declarations the tests use: no @types/node here (no npm
// registry), so just what is called, typed as Node 20 documents it.

declare const process: {
  env: Record<string, string | undefined>;
  hrtime: { bigint(): bigint };
};

declare module "node:test" {
  export interface TestContext {
    skip(message?: string): void;
    diagnostic(message: string): void;
    signal: AbortSignal;
  }
  export interface TestOptions {
    skip?: boolean | string;
    timeout?: number;
    concurrency?: number | boolean;
  }
  type Fn = (t: TestContext) => void | Promise<void>;
  export function test(name: string, fn: Fn): Promise<void>;
  export function test(name: string, options: TestOptions, fn: Fn): Promise<void>;
  export function describe(name: string, fn: () => void): void;
  export function describe(name: string, options: TestOptions, fn: () => void): void;
  export function it(name: string, fn: Fn): void;
  export function it(name: string, options: TestOptions, fn: Fn): void;
  export function before(fn: () => void | Promise<void>): void;
  export function after(fn: () => void | Promise<void>): void;
}

declare module "node:assert/strict" {
  interface Assert {
    (value: unknown, message?: string): asserts value;
    ok(value: unknown, message?: string): asserts value;
    equal<T>(actual: unknown, expected: T, message?: string): asserts actual is T;
    notEqual(actual: unknown, expected: unknown, message?: string): void;
    deepEqual<T>(actual: unknown, expected: T, message?: string): asserts actual is T;
    match(value: string, re: RegExp, message?: string): void;
    fail(message?: string): never;
    rejects(
      block: Promise<unknown> | (() => Promise<unknown>),
      expected?: (new (...args: never[]) => unknown) | ((err: unknown) => boolean) | RegExp | object,
      message?: string,
    ): Promise<void>;
  }
  const assert: Assert;
  export default assert;
}

declare module "node:fs" {
  export function readFileSync(path: string | URL, encoding: "utf8"): string;
  export function readdirSync(path: string | URL): string[];
}

declare module "node:http" {
  export interface IncomingMessage {
    method?: string;
    url?: string;
    headers: Record<string, string | string[] | undefined>;
    statusCode?: number;
    pipe<T>(destination: T): T;
    on(event: "data", listener: (chunk: Uint8Array) => void): this;
    on(event: "end" | "close", listener: () => void): this;
    on(event: "error", listener: (err: Error) => void): this;
    destroy(): void;
  }
  export interface ServerResponse {
    writeHead(status: number, headers?: Record<string, string | string[] | undefined>): this;
    write(chunk: Uint8Array | string, callback?: () => void): boolean;
    end(chunk?: Uint8Array | string): void;
    flushHeaders(): void;
    destroy(): void;
    headersSent: boolean;
  }
  export interface ClientRequest {
    on(event: "error", listener: (err: Error) => void): this;
    end(): void;
    destroy(): void;
  }
  export interface Server {
    listen(port: number, host: string, callback: () => void): this;
    address(): { port: number } | string | null;
    close(callback?: (err?: Error) => void): this;
    closeAllConnections(): void;
    on(event: "error", listener: (err: Error) => void): this;
  }
  export function createServer(handler: (req: IncomingMessage, res: ServerResponse) => void): Server;
  export function request(
    url: string,
    options: { method?: string; headers?: Record<string, string | string[] | undefined> },
    callback: (res: IncomingMessage) => void,
  ): ClientRequest;
}
