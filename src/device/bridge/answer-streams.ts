// The SSE streams on which an HTTP upstream answers the bridge's requests, watched for one that
// ends (closed by the server, or its connection lost) without its answer. The SDK's client
// transport resumes such a stream when it carried event ids (GET with Last-Event-ID, its
// reconnectionOptions), and otherwise does nothing: the request would wait for the relay's
// deadline. Here that request alone fails: at once, or once resuming the stream has failed.
import {
  StreamableHTTPClientTransport,
  type StreamableHTTPReconnectionOptions,
} from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { FetchLike } from '@modelcontextprotocol/sdk/shared/transport.js';
import { ErrorCode, type JSONRPCMessage, type RequestId } from '@modelcontextprotocol/sdk/types.js';

/**
 * How the SDK resumes a stream (the session's GET stream too): three attempts, after 0.5 s, 1 s
 * and 2 s (or as far apart as the server's `retry` field asks), all within RESUME_WITHIN_MS.
 */
export const RESUMING: StreamableHTTPReconnectionOptions = {
  initialReconnectionDelay: 500,
  reconnectionDelayGrowFactor: 2,
  maxReconnectionDelay: 2_000,
  maxRetries: 3,
};

/** How long after its stream ended a request waits for a resumed stream to open. */
export const RESUME_WITHIN_MS = 5_000;

/** The requests of one stream that ended unanswered, waiting for the SDK to resume it. */
interface Resuming {
  lastEventId: string;
  ids: RequestId[];
  failedAttempts: number;
  timer: NodeJS.Timeout;
}

/** One stream that carries answers: what it has said so far. */
interface Watch {
  ids: RequestId[];
  /** A stream resumed with GET (the SDK's), rather than a POST's own. */
  resumed: boolean;
  /** The last event id it gave: where the SDK resumes it from. */
  lastEventId?: string;
}

export class AnswerStreams {
  /** Requests sent on a stream and not yet answered, failed or cancelled → their method. */
  private readonly awaited = new Map<RequestId, string>();
  /** The event id a stream ended at → its requests, until the resumed stream opens. */
  private readonly resuming = new Map<string, Resuming>();
  /** The last `retry` a stream gave: the SDK waits that long before each attempt to resume. */
  private serverRetryMs = 0;
  private closed = false;
  /** Fails a request whose answer will not come. */
  onLost: (id: RequestId, message: string) => void = () => {};

  constructor(private readonly baseFetch: FetchLike = fetch) {}

  readonly fetch: FetchLike = async (url, init) => {
    const sent = init?.method === 'POST' ? messagesIn(init.body) : [];
    for (const message of sent) if (isCancellation(message)) this.awaited.delete(message.params.requestId);
    const resuming = init?.method === 'GET' ? this.resumingFrom(init.headers) : undefined;
    let response: Response;
    try {
      response = await this.baseFetch(url, init);
    } catch (err) {
      if (resuming) this.attemptFailed(resuming, describe(err));
      throw err;
    }
    if (this.closed) return response;
    if (init?.method === 'POST') return this.posted(sent, response);
    return resuming ? this.resumed(resuming, response) : response;
  };

  /** Stops watching: the connection is closing, and its requests fail with it. */
  close(): void {
    this.closed = true;
    for (const { timer } of this.resuming.values()) clearTimeout(timer);
    this.resuming.clear();
    this.awaited.clear();
  }

  private posted(sent: JSONRPCMessage[], response: Response): Response {
    const requests = sent.filter(isRequest);
    if (requests.length === 0 || !isEventStream(response)) return response;
    for (const { id, method } of requests) this.awaited.set(id, method);
    return this.watched(response, { ids: requests.map((r) => r.id), resumed: false });
  }

  /** The ended stream a GET resumes, if it is one of those this watches. */
  private resumingFrom(headers: HeadersInit | undefined): Resuming | undefined {
    const lastEventId = new Headers(headers).get('last-event-id');
    return lastEventId ? this.resuming.get(lastEventId) : undefined;
  }

  private resumed(resuming: Resuming, response: Response): Response {
    // 405: the server offers no GET stream, so the SDK stops trying at once.
    if (response.status === 405) {
      this.stopResuming(resuming);
      this.fail(resuming.ids, 'and does not resume streams (HTTP 405 to the GET with Last-Event-ID)');
      return response;
    }
    if (!response.ok) {
      this.attemptFailed(resuming, `HTTP ${response.status}`);
      return response;
    }
    this.stopResuming(resuming);
    return this.watched(response, { ids: resuming.ids, resumed: true });
  }

  /** The SDK retries a failed attempt until it has made RESUMING.maxRetries: then it gives up. */
  private attemptFailed(resuming: Resuming, why: string): void {
    if (++resuming.failedAttempts < RESUMING.maxRetries || this.resuming.get(resuming.lastEventId) !== resuming) return;
    this.stopResuming(resuming);
    this.fail(resuming.ids, `and ${resuming.failedAttempts} attempts to resume it failed (the last: ${why})`);
  }

  /** The response with its body read through an SSE scanner that records what `watch` said. */
  private watched(response: Response, watch: Watch): Response {
    if (!response.body) return response;
    const scanner = new SseScanner({
      field: (name, value) => this.heard(watch, name, value),
      data: (data) => this.answered(watch, data),
    });
    const body = observed(
      response.body,
      (chunk) => scanner.push(chunk),
      () => this.ended(watch),
    );
    const { status, statusText, headers } = response;
    return new Response(body, { status, statusText, headers });
  }

  private heard(watch: Watch, name: string, value: string): void {
    if (name === 'id' && value) watch.lastEventId = value;
    if (name === 'retry' && /^\d+$/.test(value)) this.serverRetryMs = Number(value);
  }

  private answered(watch: Watch, data: string): void {
    const message = parsed(data);
    if (message && isAnswer(message) && watch.ids.includes(message.id)) this.awaited.delete(message.id);
  }

  private ended(watch: Watch): void {
    if (this.closed) return;
    const ids = watch.ids.filter((id) => this.awaited.has(id));
    if (ids.length === 0) return;
    // The SDK resumes a stream from the last event id it gave, so a resumed stream that gave
    // none is resumed no further: it reconnects without Last-Event-ID (client/streamableHttp.js).
    if (watch.lastEventId === undefined)
      return this.fail(
        ids,
        watch.resumed
          ? 'and ended the resumed stream too, giving no event id to resume it from again'
          : '(it gave no event ids to resume the stream from)',
      );
    // The SDK resumes it after its delay, or the server's `retry`: wait for that, and a bit more.
    const withinMs = RESUME_WITHIN_MS + this.serverRetryMs * RESUMING.maxRetries;
    const lastEventId = watch.lastEventId;
    const resuming: Resuming = {
      lastEventId,
      ids,
      failedAttempts: 0,
      timer: setTimeout(() => {
        this.stopResuming(resuming);
        this.fail(ids, `and did not resume it within ${withinMs / 1000} s`);
      }, withinMs),
    };
    this.resuming.set(lastEventId, resuming);
  }

  private stopResuming(resuming: Resuming): void {
    clearTimeout(resuming.timer);
    if (this.resuming.get(resuming.lastEventId) === resuming) this.resuming.delete(resuming.lastEventId);
  }

  private fail(ids: RequestId[], why: string): void {
    for (const id of ids) {
      const method = this.awaited.get(id);
      if (method === undefined) continue; // answered, cancelled or failed meanwhile
      this.awaited.delete(id);
      this.onLost(id, `the bridged MCP server ended the stream of its answer to ${method} without a result ${why}`);
    }
  }
}

/**
 * The SDK's Streamable HTTP client transport, with its answer streams watched: a request whose
 * stream ended for good gets a JSON-RPC error answer (-32603), as if the server had sent it, so
 * the SDK settles that request alone.
 */
export class HttpUpstreamTransport extends StreamableHTTPClientTransport {
  private readonly answers: AnswerStreams;

  constructor(url: URL, answers = new AnswerStreams()) {
    super(url, { fetch: answers.fetch, reconnectionOptions: RESUMING });
    this.answers = answers;
    answers.onLost = (id, message) => {
      this.onerror?.(new Error(message));
      this.onmessage?.({ jsonrpc: '2.0', id, error: { code: ErrorCode.InternalError, message } });
    };
  }

  override async close(): Promise<void> {
    this.answers.close();
    await super.close();
  }
}

/** `body` read through: each chunk goes to `onChunk` first; `onEnd` when it ends or fails. */
function observed(
  body: ReadableStream<Uint8Array>,
  onChunk: (chunk: Uint8Array) => void,
  onEnd: () => void,
): ReadableStream<Uint8Array> {
  const reader = body.getReader();
  return new ReadableStream<Uint8Array>({
    async pull(controller) {
      try {
        const { done, value } = await reader.read();
        if (done) {
          controller.close();
          onEnd();
        } else {
          onChunk(value);
          controller.enqueue(value);
        }
      } catch (err) {
        controller.error(err);
        onEnd();
      }
    },
    cancel(reason) {
      return reader.cancel(reason);
    },
  });
}

/**
 * The fields of an SSE stream, as the event-stream format has them: `data` lines joined per
 * event, dispatched at the blank line; every other field reported as it comes.
 */
class SseScanner {
  private readonly decoder = new TextDecoder();
  private pending = '';
  private data: string[] = [];
  /** A chunk that ended in CR: an LF opening the next one belongs to that line end. */
  private afterCR = false;

  constructor(private readonly on: { field: (name: string, value: string) => void; data: (data: string) => void }) {}

  push(chunk: Uint8Array): void {
    let text = this.decoder.decode(chunk, { stream: true });
    if (this.afterCR && text.startsWith('\n')) text = text.slice(1);
    this.afterCR = text.endsWith('\r');
    const lines = (this.pending + text).split(/\r\n|\r|\n/);
    this.pending = lines.pop() ?? '';
    for (const line of lines) this.line(line);
  }

  private line(line: string): void {
    if (line === '') {
      if (this.data.length > 0) this.on.data(this.data.join('\n'));
      this.data = [];
      return;
    }
    if (line.startsWith(':')) return; // a comment (keep-alive)
    const colon = line.indexOf(':');
    const name = colon < 0 ? line : line.slice(0, colon);
    const value = colon < 0 ? '' : line.slice(colon + 1).replace(/^ /, '');
    this.on.field(name, value);
    if (name === 'data') this.data.push(value);
  }
}

/** The JSON-RPC messages of a POST body (one, or a batch). */
function messagesIn(body: unknown): JSONRPCMessage[] {
  const sent = typeof body === 'string' ? parsedJson(body) : undefined;
  return (Array.isArray(sent) ? sent : [sent]).filter(isObject) as JSONRPCMessage[];
}

function parsed(text: string): JSONRPCMessage | undefined {
  const value = parsedJson(text);
  return isObject(value) ? (value as JSONRPCMessage) : undefined;
}

function parsedJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

function isObject(value: unknown): value is object {
  return typeof value === 'object' && value !== null;
}

function isRequest(message: JSONRPCMessage): message is JSONRPCMessage & { id: RequestId; method: string } {
  return 'method' in message && 'id' in message && message.id !== undefined;
}

function isAnswer(message: JSONRPCMessage): message is JSONRPCMessage & { id: RequestId } {
  return 'id' in message && ('result' in message || 'error' in message);
}

function isCancellation(message: JSONRPCMessage): message is JSONRPCMessage & { params: { requestId: RequestId } } {
  return 'method' in message && message.method === 'notifications/cancelled' && !('id' in message);
}

/** A failed fetch as fetch words it, with its cause's code (ECONNREFUSED…) when it has one. */
function describe(err: unknown): string {
  if (!(err instanceof Error)) return String(err);
  const cause = err.cause as { code?: string } | undefined;
  return cause?.code ? `${err.message} (${cause.code})` : err.message;
}

function isEventStream(response: Response): boolean {
  const type = response.headers.get('content-type') ?? '';
  return response.ok && type.split(';')[0].trim().toLowerCase() === 'text/event-stream';
}
