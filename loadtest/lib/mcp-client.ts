// A lean MCP Streamable HTTP client for load (the SDK client costs more CPU per call than
// the relay does, which would measure the client): initialize once, then POSTs of JSON-RPC
// over keep-alive connections; answers as JSON or as an SSE stream are both read.
import { Agent, request } from 'node:http';

export const PROTOCOL = '2025-11-25';

export interface Answer {
  status: number;
  /** The JSON-RPC message answering the request (the last one on an SSE stream). */
  json: any;
  /** Bytes of the HTTP body. */
  bytes: number;
}

export function clientAgent(maxSockets = 64): Agent {
  return new Agent({ keepAlive: true, maxSockets });
}

export function postMcp(
  url: string,
  body: string | Buffer,
  headers: Record<string, string>,
  agent: Agent,
  opts: { signal?: AbortSignal; timeoutMs?: number } = {},
): Promise<Answer & { headers: Record<string, string | string[] | undefined> }> {
  return new Promise((resolve, reject) => {
    const req = request(
      url,
      {
        method: 'POST',
        agent,
        signal: opts.signal,
        timeout: opts.timeoutMs ?? 700_000,
        headers: {
          'content-type': 'application/json',
          accept: 'application/json, text/event-stream',
          'content-length': String(Buffer.byteLength(body)),
          ...headers,
        },
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('error', reject);
        res.on('end', () => {
          const raw = Buffer.concat(chunks);
          const text = raw.toString('utf8');
          const ct = String(res.headers['content-type'] ?? '');
          let json: any;
          try {
            if (ct.includes('text/event-stream')) {
              const datas = [...text.matchAll(/^data: (.*)$/gm)].map((m) => m[1]);
              json = datas.length ? JSON.parse(datas[datas.length - 1]) : undefined;
            } else if (text) json = JSON.parse(text);
          } catch {
            json = undefined;
          }
          resolve({ status: res.statusCode ?? 0, json, bytes: raw.length, headers: res.headers });
        });
      },
    );
    req.on('timeout', () => req.destroy(new Error('HTTP request timed out')));
    req.on('error', reject);
    req.end(body);
  });
}

/** The initialize request every load client opens its session with. */
function initializeBody(clientName: string): string {
  return JSON.stringify({
    jsonrpc: '2.0',
    id: 0,
    method: 'initialize',
    params: { protocolVersion: PROTOCOL, capabilities: {}, clientInfo: { name: clientName, version: '1' } },
  });
}

/**
 * Opens a session with one initialize POST over fetch (for scenarios that keep no agent of
 * their own); its id, or undefined when the relay refused it.
 */
export async function initializeSession(
  mcpUrl: string,
  token: string,
  clientName: string,
): Promise<string | undefined> {
  const r = await fetch(mcpUrl, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
      'x-api-key': token,
      'mcp-protocol-version': PROTOCOL,
    },
    body: initializeBody(clientName),
  });
  await r.text();
  return r.headers.get('mcp-session-id') ?? undefined;
}

export class McpSession {
  sessionId = '';
  private nextId = 1;
  constructor(
    readonly baseUrl: string,
    readonly token: string,
    readonly agent: Agent,
  ) {}

  get mcpUrl(): string {
    return `${this.baseUrl}/mcp`;
  }

  private headers(): Record<string, string> {
    return {
      'x-api-key': this.token,
      ...(this.sessionId ? { 'mcp-session-id': this.sessionId, 'mcp-protocol-version': PROTOCOL } : {}),
    };
  }

  async initialize(): Promise<this> {
    const r = await postMcp(this.mcpUrl, initializeBody('loadtest'), this.headers(), this.agent);
    const sid = r.headers['mcp-session-id'];
    if (r.status !== 200 || typeof sid !== 'string') throw new Error(`initialize failed: ${r.status}`);
    this.sessionId = sid;
    await postMcp(
      this.mcpUrl,
      JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' }),
      this.headers(),
      this.agent,
    );
    return this;
  }

  newId(): number {
    return this.nextId++;
  }

  /** tools/call; `id` lets the caller cancel it by id later. */
  call(
    name: string,
    args: Record<string, unknown>,
    opts: { id?: number; signal?: AbortSignal; timeoutMs?: number } = {},
  ): Promise<Answer> {
    const id = opts.id ?? this.newId();
    return postMcp(
      this.mcpUrl,
      JSON.stringify({ jsonrpc: '2.0', id, method: 'tools/call', params: { name, arguments: args } }),
      this.headers(),
      this.agent,
      opts,
    );
  }

  /** A raw body (for frames of an exact size). */
  postRaw(body: string | Buffer, opts: { signal?: AbortSignal } = {}): Promise<Answer> {
    return postMcp(this.mcpUrl, body, this.headers(), this.agent, opts);
  }

  /** DELETE /mcp: the client ends its session. Resolves with the status. */
  end(): Promise<number> {
    return new Promise((resolve, reject) => {
      const req = request(
        this.mcpUrl,
        { method: 'DELETE', agent: this.agent, headers: this.headers(), timeout: 30_000 },
        (res) => {
          res.resume();
          res.on('end', () => resolve(res.statusCode ?? 0));
        },
      );
      req.on('timeout', () => req.destroy(new Error('DELETE timed out')));
      req.on('error', reject);
      req.end();
    });
  }

  cancel(requestId: number, reason = 'load test cancels'): Promise<Answer> {
    return postMcp(
      this.mcpUrl,
      JSON.stringify({ jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId, reason } }),
      this.headers(),
      this.agent,
    );
  }
}
