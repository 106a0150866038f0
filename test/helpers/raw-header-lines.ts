// One POST /mcp written byte for byte on a raw socket, for what fetch cannot send: a header
// line repeated, header bytes outside ASCII.
import { connect } from 'node:net';

export const V = '2026-07-28';
export const META = {
  'io.modelcontextprotocol/protocolVersion': V,
  'io.modelcontextprotocol/clientInfo': { name: 'raw-lines', version: '1' },
  'io.modelcontextprotocol/clientCapabilities': {},
};

export interface RawLinesAnswer {
  status: number;
  /** The status line and header lines, as received. */
  head: string;
  body: string;
  json: any;
}

/** `headerLines` are written as given (UTF-8 bytes), after Host, Connection and Content-Length. */
export function rawPost(port: number, headerLines: string[], body: string, path = '/mcp'): Promise<RawLinesAnswer> {
  return new Promise((resolve, reject) => {
    const b = Buffer.from(body, 'utf8');
    const head = Buffer.from(
      `POST ${path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\nContent-Length: ${b.length}\r\n` +
        headerLines.map((l) => `${l}\r\n`).join('') +
        '\r\n',
      'utf8',
    );
    const s = connect(port, '127.0.0.1', () => s.write(Buffer.concat([head, b])));
    const chunks: Buffer[] = [];
    const timer = setTimeout(() => s.destroy(new Error('no answer within 5 s')), 5000);
    s.on('data', (d) => chunks.push(d));
    s.on('error', (e) => (clearTimeout(timer), reject(e)));
    s.on('close', () => {
      clearTimeout(timer);
      const text = Buffer.concat(chunks).toString('utf8');
      const status = Number(/^HTTP\/1\.1 (\d{3})/.exec(text)?.[1] ?? 0);
      const headEnd = text.indexOf('\r\n\r\n');
      const bodyText = text.slice(headEnd + 4);
      let json: any;
      try {
        json = JSON.parse(bodyText);
      } catch {
        json = undefined;
      }
      resolve({ status, head: text.slice(0, headEnd), body: bodyText, json });
    });
  });
}

/** The header lines a conforming 2026-07-28 client sends with every POST, credential included. */
export function statelessHeaders(token: string, version = V): string[] {
  return [
    'Content-Type: application/json',
    'Accept: application/json, text/event-stream',
    `X-Api-Key: ${token}`,
    `MCP-Protocol-Version: ${version}`,
  ];
}

export function toolCallBody(id: number, name: string, args: Record<string, unknown>): string {
  return JSON.stringify({ jsonrpc: '2.0', id, method: 'tools/call', params: { name, arguments: args, _meta: META } });
}
