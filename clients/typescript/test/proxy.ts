// A fault-injecting HTTP proxy in front of the live API: it forwards every
// request untouched, and can cut event streams after N events or go down
// (dropping every connection and refusing new ones) and come back on the
// same port, as an API process restart looks to a client.
import { type IncomingMessage, type Server, type ServerResponse, createServer, request } from "node:http";

/** The proxy's faults and its observations. */
export class FaultProxy {
  /** Cut each of the next `cutEvents.length` event streams after this many events. */
  cutEvents: number[] = [];
  /** Answer this many next requests with 503 + Retry-After: 0. */
  unavailable = 0;
  /** Forward this many next requests, then drop the connection instead of answering. */
  dropAnswers = 0;
  /** The Last-Event-ID headers of the event streams opened, in order. */
  readonly lastEventIds: (string | undefined)[] = [];
  /** Every request path seen, in order. */
  readonly paths: string[] = [];
  private server: Server | undefined;
  private port = 0;

  constructor(private readonly target: string) {}

  /** The proxy's base URL. */
  get url(): string {
    return `http://127.0.0.1:${this.port}`;
  }

  /** Starts listening (on the same port as before after a down()). */
  async up(): Promise<void> {
    const server = createServer((req, res) => this.forward(req, res));
    await new Promise<void>((resolve) => server.listen(this.port, "127.0.0.1", resolve));
    const addr = server.address();
    if (addr && typeof addr === "object") this.port = addr.port;
    this.server = server;
  }

  /** Drops every connection and stops listening. */
  async down(): Promise<void> {
    const s = this.server;
    this.server = undefined;
    if (!s) return;
    const closed = new Promise<void>((resolve) => s.close(() => resolve()));
    s.closeAllConnections();
    await closed;
  }

  private forward(req: IncomingMessage, res: ServerResponse): void {
    const path = req.url ?? "/";
    this.paths.push(path);
    if (this.unavailable > 0) {
      this.unavailable--;
      res.writeHead(503, { "Content-Type": "application/problem+json", "Retry-After": "0" });
      res.end(JSON.stringify({ type: "urn:personaq:problem:unavailable", title: "Unavailable", status: 503, detail: "injected by the test proxy" }));
      return;
    }
    const dropAnswer = this.dropAnswers > 0;
    if (dropAnswer) this.dropAnswers--;
    const isEvents = path.split("?")[0].endsWith("/events");
    const cutAfter = isEvents ? this.cutEvents.shift() : undefined;
    if (isEvents) this.lastEventIds.push(header(req, "last-event-id"));
    const headers = { ...req.headers, host: new URL(this.target).host };
    const up = request(this.target + path, { method: req.method, headers }, (upRes) => {
      if (dropAnswer) {
        upRes.destroy();
        res.destroy();
        return;
      }
      res.writeHead(upRes.statusCode ?? 502, upRes.headers);
      res.flushHeaders();
      let events = 0;
      let tail = "";
      let cut = false;
      upRes.on("data", (chunk) => {
        if (cut) return;
        if (cutAfter === undefined) {
          res.write(chunk);
          return;
        }
        // Cut right after the cutAfter-th complete event (a blank line ends one).
        tail += new TextDecoder().decode(chunk);
        let i: number;
        while ((i = tail.indexOf("\n\n")) >= 0) {
          const event = tail.slice(0, i + 2);
          tail = tail.slice(i + 2);
          if (!event.startsWith(":")) events++;
          if (events >= cutAfter) {
            // Drop the connection once the event reached the socket.
            cut = true;
            upRes.destroy();
            res.write(event, () => res.destroy());
            return;
          }
          res.write(event);
        }
      });
      upRes.on("end", () => {
        if (!cut) res.end(tail);
      });
      upRes.on("error", () => res.destroy());
    });
    up.on("error", () => {
      if (!res.headersSent) res.writeHead(502);
      res.destroy();
    });
    req.pipe(up);
  }
}

function header(req: IncomingMessage, name: string): string | undefined {
  const v = req.headers[name];
  return Array.isArray(v) ? v[0] : v;
}
