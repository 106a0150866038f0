// Raw HTTP/1.1 on one connection, for what fetch hides: a HEAD answer's bytes, and what follows it.
import { connect, type Socket } from 'node:net';
import { expect } from 'vitest';

/**
 * HEAD `path`, then (once its header block is in) GET `next` on the same connection; returns
 * every byte the relay sent once they hold `until`. A body after the HEAD answer would be read
 * as the start of the GET's answer. (Not pipelined: uWS closes a connection that sends a request before the
 * previous one is answered.)
 */
export function headThenGet(
  port: number,
  path: string,
  next = '/healthz',
  until = '"status":"ok"',
  /** Sent with the HEAD (a credential). */
  headers: Record<string, string> = {},
): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1');
    let text = '';
    let sentGet = false;
    const timer = setTimeout(() => {
      socket.destroy();
      reject(new Error(`no complete answer; got ${JSON.stringify(text)}`));
    }, 5000);
    socket.on('data', (d) => {
      text += d.toString('latin1');
      if (!sentGet && text.includes('\r\n\r\n')) {
        sentGet = true;
        socket.write(`GET ${next} HTTP/1.1\r\nHost: x\r\n\r\n`);
      }
      if (text.includes(until)) {
        clearTimeout(timer);
        socket.destroy();
        resolve(text);
      }
    });
    socket.on('error', reject);
    const extra = Object.entries(headers)
      .map(([k, v]) => `${k}: ${v}\r\n`)
      .join('');
    socket.write(`HEAD ${path} HTTP/1.1\r\nHost: x\r\n${extra}\r\n`);
  });
}

/** The answers in `text`, split at each status line. */
export const responses = (text: string) => text.split(/(?=HTTP\/1\.1 \d{3} )/);

/** What the client port answers a path no route serves: the GET after a HEAD waits for it. */
const CLIENT_NOT_FOUND = JSON.stringify({ error: 'not_found', message: 'no such endpoint' });

/**
 * HEAD `path` on the client port, then a GET of a path nothing serves on the same connection:
 * the HEAD answer's text, once checked to carry no body (the 404 comes next, and nothing else).
 */
export async function headOnClientPort(
  port: number,
  path: string,
  headers: Record<string, string> = {},
): Promise<string> {
  const [answer, next, ...rest] = responses(await headThenGet(port, path, '/nothing', CLIENT_NOT_FOUND, headers));
  expect(answer.endsWith('\r\n\r\n'), `${path}: HEAD answered with a body: ${JSON.stringify(answer)}`).toBe(true);
  expect(next, path).toMatch(/^HTTP\/1\.1 404 Not Found\r\n/);
  expect(rest, path).toEqual([]);
  return answer;
}

/** A header's value in a raw answer's text (case-insensitive name), or null. */
export const headerOf = (answer: string, name: string) =>
  new RegExp(`\\r\\n${name}: ([^\\r]*)\\r\\n`, 'i').exec(answer)?.[1] ?? null;

/** One answer read off a raw connection: its status, its headers (lower-case names, repeated ones joined by `\n`), its body. */
export interface RawAnswer {
  status: number;
  headers: Record<string, string>;
  body: string;
}

/**
 * Requests one at a time on one keep-alive connection, each answer read by its Content-Length:
 * what fetch hides (`Keep-Alive`, `Connection`) and which connection an answer came on.
 */
export class KeepAliveConnection {
  private readonly socket: Socket;
  private buf = '';
  private waiter?: { head: boolean; resolve: (a: RawAnswer) => void; reject: (err: Error) => void };

  constructor(port: number) {
    this.socket = connect(port, '127.0.0.1');
    this.socket.on('data', (d) => {
      this.buf += d.toString('latin1');
      this.take();
    });
    const gone = (err?: Error) => {
      this.waiter?.reject(err ?? new Error('the relay ended the connection before answering'));
      this.waiter = undefined;
    };
    this.socket.on('error', gone);
    this.socket.on('end', () => gone());
  }

  request(method: string, path: string, headers: Record<string, string> = {}, body = ''): Promise<RawAnswer> {
    const head = Object.entries({ host: 'relay', 'content-length': String(Buffer.byteLength(body)), ...headers })
      .map(([k, v]) => `${k}: ${v}\r\n`)
      .join('');
    return new Promise((resolve, reject) => {
      this.waiter = { head: method === 'HEAD', resolve, reject };
      this.socket.write(`${method} ${path} HTTP/1.1\r\n${head}\r\n${body}`);
    });
  }

  close(): void {
    this.socket.destroy();
  }

  private take(): void {
    const end = this.buf.indexOf('\r\n\r\n');
    if (end < 0 || !this.waiter) return;
    const lines = this.buf.slice(0, end).split('\r\n');
    const headers: Record<string, string> = {};
    for (const l of lines.slice(1)) {
      const name = l.slice(0, l.indexOf(':')).toLowerCase();
      const value = l.slice(l.indexOf(':') + 1).trim();
      headers[name] = name in headers ? `${headers[name]}\n${value}` : value;
    }
    // A HEAD answer's Content-Length is that of GET's body, which it does not send.
    const length = this.waiter.head ? 0 : Number(headers['content-length'] ?? 0);
    if (this.buf.length < end + 4 + length) return;
    const body = Buffer.from(this.buf.slice(end + 4, end + 4 + length), 'latin1').toString('utf8');
    this.buf = this.buf.slice(end + 4 + length);
    const w = this.waiter;
    this.waiter = undefined;
    w.resolve({ status: Number(lines[0].split(' ')[1]), headers, body });
  }
}
