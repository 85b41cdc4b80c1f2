// A text/event-stream parser (the WHATWG "event stream interpretation"),
// over a fetch body: no EventSource, so it sends headers and honours aborts.

/** One dispatched server-sent event. */
export interface SseMessage {
  /** The event type ("message" when the stream names none). */
  event: string;
  data: string;
  /** The last event ID in force when this event was dispatched. */
  id: string;
}

/** Splits decoded text into lines at CRLF, LF or CR, across chunk boundaries. */
export class LineSplitter {
  private buf = "";
  private skipLF = false;

  /** Adds text and returns the lines it completed. */
  push(text: string): string[] {
    const lines: string[] = [];
    for (let i = 0; i < text.length; i++) {
      const c = text[i];
      if (this.skipLF) {
        this.skipLF = false;
        if (c === "\n") continue;
      }
      if (c === "\n" || c === "\r") {
        lines.push(this.buf);
        this.buf = "";
        this.skipLF = c === "\r";
      } else {
        this.buf += c;
      }
    }
    return lines;
  }
}

/** Accumulates fields line by line and dispatches events at blank lines. */
export class SseParser {
  private data: string[] = [];
  private event = "";
  /** The stream's last event ID, kept across events as the spec says. */
  lastEventId: string;

  constructor(lastEventId = "") {
    this.lastEventId = lastEventId;
  }

  /** Feeds one line; returns the event it dispatched, if any. */
  line(line: string): SseMessage | undefined {
    if (line === "") return this.dispatch();
    if (line.startsWith(":")) return undefined;
    const colon = line.indexOf(":");
    const field = colon < 0 ? line : line.slice(0, colon);
    let value = colon < 0 ? "" : line.slice(colon + 1);
    if (value.startsWith(" ")) value = value.slice(1);
    switch (field) {
      case "event":
        this.event = value;
        break;
      case "data":
        this.data.push(value);
        break;
      case "id":
        if (!value.includes("\0")) this.lastEventId = value;
        break;
    }
    return undefined;
  }

  private dispatch(): SseMessage | undefined {
    const data = this.data;
    const event = this.event;
    this.data = [];
    this.event = "";
    if (data.length === 0) return undefined;
    return { event: event || "message", data: data.join("\n"), id: this.lastEventId };
  }
}

/**
 * Reads a fetch body as server-sent events. An event cut off by the end of
 * the stream is not dispatched (the spec's rule), so a resumed stream
 * repeats it rather than losing it.
 */
export async function* readSse(body: ReadableStream<Uint8Array>, lastEventId = ""): AsyncGenerator<SseMessage> {
  const reader = body.getReader();
  const decoder = new TextDecoder();
  const lines = new LineSplitter();
  const parser = new SseParser(lastEventId);
  let ended = false;
  try {
    for (;;) {
      const { done, value } = await reader.read();
      ended = done;
      const text = done ? decoder.decode() : decoder.decode(value, { stream: true });
      for (const l of lines.push(text)) {
        const msg = parser.line(l);
        if (msg) yield msg;
      }
      if (done) return;
    }
  } finally {
    // A consumer that stopped early closes the connection.
    if (!ended) await reader.cancel().catch(() => undefined);
  }
}
