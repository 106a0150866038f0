// The lines of a stdio upstream's stdout, read as the SDK's ReadBuffer reads them
// (shared/stdio.js: one JSON-RPC message per line, a line over the size cap an error), with
// one difference, for a server that wrote a message without its newline: the line that message
// ran into is still dropped, but an answer found whole at its start fails its request at once
// (docs/decisions/0227-an-answer-that-shares-its-line.md).
import { Buffer } from 'node:buffer';
import { deserializeMessage, STDIO_DEFAULT_MAX_BUFFER_SIZE } from '@modelcontextprotocol/sdk/shared/stdio.js';
import {
  ErrorCode,
  isJSONRPCErrorResponse,
  isJSONRPCResultResponse,
  type JSONRPCErrorResponse,
  type JSONRPCMessage,
  type RequestId,
} from '@modelcontextprotocol/sdk/types.js';

/** What the request whose answer was on such a line gets instead (no content of that answer). */
export const SHARED_LINE_ANSWER =
  "the bridged MCP server's answer was dropped: it shared its line with more output, and a stdio MCP server must end every message with a newline";

/** A line that held a whole message and more: dropped, as any line that is not one message. */
export class SharedLineError extends Error {
  constructor(readonly answered: number) {
    super(`a line held a JSON-RPC message and more output (${answered} answers in it)`);
  }
}

/** Has the shape of the SDK's ReadBuffer, which StdioUpstreamTransport replaces with it. */
export class LineReader {
  private buffer: Buffer | undefined;
  /** The error answers of the last shared line, given out before the next line is read. */
  private readonly failed: JSONRPCErrorResponse[] = [];

  constructor(private readonly maxBytes = STDIO_DEFAULT_MAX_BUFFER_SIZE) {}

  append(chunk: Buffer): void {
    if ((this.buffer?.length ?? 0) + chunk.length > this.maxBytes) {
      this.clear();
      throw new Error(`ReadBuffer exceeded maximum size of ${this.maxBytes} bytes`);
    }
    this.buffer = this.buffer ? Buffer.concat([this.buffer, chunk]) : chunk;
  }

  readMessage(): JSONRPCMessage | null {
    const failed = this.failed.shift();
    if (failed) return failed;
    const index = this.buffer?.indexOf('\n') ?? -1;
    if (!this.buffer || index === -1) return null;
    const line = this.buffer.toString('utf8', 0, index).replace(/\r$/, '');
    this.buffer = this.buffer.subarray(index + 1);
    try {
      return deserializeMessage(line);
    } catch (err) {
      const leading = leadingMessages(line);
      if (leading.length === 0) throw err;
      // The SDK reports the throw (onerror), then reads on: these answers come next.
      for (const message of leading) {
        if (isJSONRPCResultResponse(message) || isJSONRPCErrorResponse(message))
          if (message.id !== undefined) this.failed.push(failedAnswer(message.id));
      }
      throw new SharedLineError(this.failed.length);
    }
  }

  clear(): void {
    this.buffer = undefined;
    this.failed.length = 0;
  }
}

function failedAnswer(id: RequestId): JSONRPCErrorResponse {
  return { jsonrpc: '2.0', id, error: { code: ErrorCode.InternalError, message: SHARED_LINE_ANSWER } };
}

/**
 * The JSON-RPC messages found whole, one after another, at the start of a line that is not one
 * message: `{…}{…}` or `{…}log text`. Reading stops at the first thing that is not a whole JSON
 * object; a message cut short (its end lost) makes the rest unreadable, so nothing after it counts.
 */
export function leadingMessages(line: string): JSONRPCMessage[] {
  const messages: JSONRPCMessage[] = [];
  let depth = 0;
  let start = 0;
  let inString = false;
  for (let i = 0; i < line.length; i++) {
    const c = line[i];
    if (inString) {
      if (c === '\\') i++;
      else if (c === '"') inString = false;
    } else if (depth === 0) {
      if (c === ' ' || c === '\t') continue;
      if (c !== '{') break;
      start = i;
      depth = 1;
    } else if (c === '"') inString = true;
    else if (c === '{' || c === '[') depth++;
    else if (c === '}' || c === ']') {
      if (--depth > 0) continue;
      try {
        messages.push(deserializeMessage(line.slice(start, i + 1)));
      } catch {
        break;
      }
    }
  }
  return messages;
}
