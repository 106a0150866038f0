// An MCP SDK Transport over one `ws` socket: one JSON-RPC message per text frame, never a frame
// over 256 KiB. Works on either end of the socket (the agent serves over it; tests drive it as a client).
import { Buffer } from 'node:buffer';
import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js';
import {
  JSONRPCMessageSchema,
  type JSONRPCErrorResponse,
  type JSONRPCMessage,
  type JSONRPCNotification,
  type JSONRPCRequest,
  type JSONRPCResultResponse,
  type RequestId,
} from '@modelcontextprotocol/sdk/types.js';
import WebSocket, { type RawData } from 'ws';

/** The phonebridge-v1 frame limit, in bytes of the UTF-8 text frame payload. */
export const MAX_FRAME_BYTES = 262_144;
/** JSON-RPC error code for a non-tool response that would not fit in a frame. */
// The relay's too_large code (docs/PROTOCOL.md, error codes): outside JSON-RPC's reserved range.
export const TOO_LARGE_RPC_CODE = -31003;

export interface WebSocketTransportOptions {
  maxFrameBytes?: number;
  log?: { warn(msg: string): void };
}

export class WebSocketTransport implements Transport {
  onclose?: () => void;
  onerror?: (error: Error) => void;
  onmessage?: (message: JSONRPCMessage) => void;

  private readonly maxFrameBytes: number;
  private readonly log: { warn(msg: string): void };
  private started = false;
  private closed = false;
  /** Frames that arrived before start(): the relay sends initialize as soon as the socket opens. */
  private early: JSONRPCMessage[] = [];
  /**
   * Incoming request id → method, to shape an oversized response (tools/call gets a tool error).
   * Only requests still open: one leaves when it is answered or cancelled, all when the socket closes.
   */
  private readonly openRequests = new Map<RequestId, string>();

  constructor(
    private readonly socket: WebSocket,
    opts: WebSocketTransportOptions = {},
  ) {
    this.maxFrameBytes = opts.maxFrameBytes ?? MAX_FRAME_BYTES;
    this.log = opts.log ?? { warn: (msg) => console.warn(msg) };
    socket.on('message', this.onFrame);
    socket.on('error', (err) => this.onerror?.(err));
    socket.on('close', () => this.finish());
  }

  // eslint-disable-next-line @typescript-eslint/require-await -- the SDK's Transport interface returns a promise; a throw must reject
  async start(): Promise<void> {
    if (this.started) throw new Error('WebSocketTransport already started');
    this.started = true;
    const early = this.early;
    this.early = [];
    for (const message of early) this.onmessage?.(message);
    if (this.socket.readyState === WebSocket.CLOSED) this.finish(); // closed before we were handed the socket
  }

  async send(message: JSONRPCMessage): Promise<void> {
    if (this.closed || this.socket.readyState !== WebSocket.OPEN) throw new Error('WebSocket is not open');
    let text = JSON.stringify(message);
    const bytes = Buffer.byteLength(text, 'utf8');
    if (bytes > this.maxFrameBytes) {
      const replacement = this.replaceOversized(message, bytes);
      if (replacement === undefined) return;
      text = JSON.stringify(replacement);
    }
    if (isResponse(message) && message.id !== undefined) this.openRequests.delete(message.id);
    await new Promise<void>((resolve, reject) => this.socket.send(text, (err) => (err ? reject(err) : resolve())));
  }

  // eslint-disable-next-line @typescript-eslint/require-await -- the SDK's Transport interface returns a promise
  async close(): Promise<void> {
    if (this.socket.readyState === WebSocket.CONNECTING || this.socket.readyState === WebSocket.OPEN)
      this.socket.close(1000);
    this.finish(); // don't wait for the closing handshake; onclose must follow close()
  }

  private readonly onFrame = (data: RawData, isBinary: boolean): void => {
    if (isBinary) {
      this.onerror?.(new Error('dropped a binary frame: phonebridge-v1 carries JSON-RPC in text frames'));
      return;
    }
    let message: JSONRPCMessage;
    try {
      const text = (
        Array.isArray(data) ? Buffer.concat(data) : Buffer.isBuffer(data) ? data : Buffer.from(data)
      ).toString('utf8');
      message = JSONRPCMessageSchema.parse(JSON.parse(text));
    } catch (err) {
      this.onerror?.(new Error(`dropped a malformed frame: ${(err as Error).message.slice(0, 200)}`));
      return;
    }
    if (isRequest(message)) this.openRequests.set(message.id, message.method);
    // A cancelled request is never answered (MCP forbids it), so send() would never forget it: on a
    // socket that stays up for days every cancel and relay timeout (docs/PROTOCOL.md "Timeouts")
    // would stay in the map.
    else if (isCancellation(message)) this.openRequests.delete(message.params.requestId);
    if (this.started) this.onmessage?.(message);
    else this.early.push(message);
  };

  /** What to send instead of a message that would not fit in a frame; undefined = send nothing. */
  private replaceOversized(message: JSONRPCMessage, bytes: number): JSONRPCMessage | undefined {
    const what = `${bytes} bytes, over the ${this.maxFrameBytes}-byte frame limit`;
    if (isResponse(message)) {
      if (message.id !== undefined && this.openRequests.get(message.id) === 'tools/call') {
        // A tool error, not a protocol error, so the model sees it and can ask for less.
        const error = {
          code: 'too_large',
          message: `The result is ${what}. Ask for less (a smaller screenshot, a narrower query).`,
          bytes,
          limit: this.maxFrameBytes,
        };
        return {
          jsonrpc: '2.0',
          id: message.id,
          result: { content: [{ type: 'text', text: JSON.stringify({ error }) }], isError: true },
        };
      }
      return {
        jsonrpc: '2.0',
        id: message.id,
        error: {
          code: TOO_LARGE_RPC_CODE,
          message: `too_large: the response is ${what}`,
          data: { code: 'too_large', bytes, limit: this.maxFrameBytes },
        },
      };
    }
    if (isRequest(message)) throw new Error(`request ${message.method} is ${what}; not sent`);
    this.log.warn(`dropped notification ${message.method}: ${what}`);
    return undefined;
  }

  /** Runs once, whether the peer closed or close() was called. */
  private finish(): void {
    if (this.closed) return;
    this.closed = true;
    this.openRequests.clear();
    this.onclose?.();
  }
}

function isRequest(message: JSONRPCMessage): message is JSONRPCRequest {
  return 'method' in message && 'id' in message;
}

function isCancellation(
  message: JSONRPCMessage,
): message is JSONRPCNotification & { params: { requestId: RequestId } } {
  if (!('method' in message) || 'id' in message || message.method !== 'notifications/cancelled') return false;
  const requestId = message.params?.requestId;
  return typeof requestId === 'string' || typeof requestId === 'number';
}

function isResponse(message: JSONRPCMessage): message is JSONRPCResultResponse | JSONRPCErrorResponse {
  return 'result' in message || 'error' in message;
}
