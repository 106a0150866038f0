// Raw MCP over fetch for budget and revocation tests: sessions, GET streams, calls and the
// 2026-07-28 subscriptions/listen stream, each request exactly as written here.
export const SESSION_REVISION = '2025-11-25';
export const STATELESS_REVISION = '2026-07-28';

export function baseHeaders(token: string, revision = SESSION_REVISION): Record<string, string> {
  return {
    'content-type': 'application/json',
    accept: 'application/json, text/event-stream',
    'x-api-key': token,
    'mcp-protocol-version': revision,
  };
}

/** A fresh session on `mcpUrl`: the headers each later request carries, its id included. */
export async function openSession(
  mcpUrl: string,
  token: string,
  revision = SESSION_REVISION,
): Promise<Record<string, string>> {
  const headers = baseHeaders(token, revision);
  const init = await fetch(mcpUrl, {
    method: 'POST',
    headers,
    body: JSON.stringify({
      jsonrpc: '2.0',
      id: 0,
      method: 'initialize',
      params: { protocolVersion: revision, capabilities: {}, clientInfo: { name: 'raw', version: '1' } },
    }),
  });
  await init.text();
  if (init.status !== 200) throw new Error(`initialize answered ${init.status}`);
  return { ...headers, 'mcp-session-id': init.headers.get('mcp-session-id')! };
}

/** An SSE response being read: its text so far, and whether the server ended it. */
export interface OpenStream {
  status: number;
  text(): string;
  ended: Promise<void>;
  isEnded(): boolean;
  abort(): void;
}

export async function openStream(url: string, init: RequestInit): Promise<OpenStream> {
  const ctl = new AbortController();
  const res = await fetch(url, { ...init, signal: ctl.signal });
  let text = '';
  let done = false;
  const ended = (async () => {
    if (!res.body) return;
    const reader = res.body.getReader();
    try {
      for (;;) {
        const r = await reader.read();
        if (r.done) break;
        text += new TextDecoder().decode(r.value);
      }
    } catch {
      // aborted by the test
    } finally {
      done = true;
    }
  })();
  return { status: res.status, text: () => text, ended, isEnded: () => done, abort: () => ctl.abort() };
}

/** GET /mcp: the session's notification stream. */
export function getStream(mcpUrl: string, headers: Record<string, string>): Promise<OpenStream> {
  return openStream(mcpUrl, { method: 'GET', headers: { ...headers, accept: 'text/event-stream' } });
}

export function toolCall(id: number | string, name: string, args: Record<string, unknown>): string {
  return JSON.stringify({ jsonrpc: '2.0', id, method: 'tools/call', params: { name, arguments: args } });
}

/** One POST; its body parsed (the last JSON-RPC message when it is an SSE stream). */
export async function post(
  mcpUrl: string,
  headers: Record<string, string>,
  body: string,
): Promise<{ status: number; json: any; text: string }> {
  const r = await fetch(mcpUrl, { method: 'POST', headers, body });
  const text = await r.text();
  let json: any;
  try {
    json = JSON.parse(text);
  } catch {
    const msgs = [...text.matchAll(/data: (\{.*\})\n/g)].map((m) => JSON.parse(m[1]));
    json = msgs.at(-1);
  }
  return { status: r.status, json, text };
}

/** The `_meta` every 2026-07-28 request carries. */
export const STATELESS_META = {
  'io.modelcontextprotocol/protocolVersion': STATELESS_REVISION,
  'io.modelcontextprotocol/clientInfo': { name: 'raw', version: '1' },
  'io.modelcontextprotocol/clientCapabilities': {},
};

/** The headers and body of a 2026-07-28 subscriptions/listen (id `sub`) for `notifications`. */
export function listenRequest(
  token: string,
  notifications: Record<string, unknown> = { toolsListChanged: true },
  accept = 'application/json, text/event-stream',
): { method: 'POST'; headers: Record<string, string>; body: string } {
  return {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      ...(accept ? { accept } : {}),
      'x-api-key': token,
      'mcp-protocol-version': STATELESS_REVISION,
      'mcp-method': 'subscriptions/listen',
    },
    body: JSON.stringify({
      jsonrpc: '2.0',
      id: 'sub',
      method: 'subscriptions/listen',
      params: { notifications, _meta: STATELESS_META },
    }),
  };
}

/** 2026-07-28 subscriptions/listen: an SSE stream of list_changed notifications. */
export function listenStream(mcpUrl: string, token: string): Promise<OpenStream> {
  return openStream(mcpUrl, listenRequest(token));
}

/** One SSE event of a GET stream as readGetStream collects it. */
export interface SseEvent {
  id?: string;
  data: string;
}

/**
 * A GET stream (with Last-Event-ID to resume) whose events are collected as they come until
 * `stop`; `texts` reads each notification's `params.data`.
 */
export async function readGetStream(url: string, headers: Record<string, string>, lastEventId?: string) {
  const ac = new AbortController();
  const res = await fetch(url, {
    headers: { ...headers, accept: 'text/event-stream', ...(lastEventId ? { 'last-event-id': lastEventId } : {}) },
    signal: ac.signal,
  });
  if (res.status !== 200) throw new Error(`GET answered ${res.status}`);
  const events: SseEvent[] = [];
  let buf = '';
  const done = (async () => {
    const reader = res.body!.getReader();
    try {
      for (;;) {
        const r = await reader.read();
        if (r.done) return;
        buf += new TextDecoder().decode(r.value);
        let i: number;
        while ((i = buf.indexOf('\n\n')) >= 0) {
          const block = buf.slice(0, i);
          buf = buf.slice(i + 2);
          const ev: SseEvent = { data: '' };
          let isEvent = false;
          for (const line of block.split('\n')) {
            if (line.startsWith('id: ')) ev.id = line.slice(4);
            else if (line.startsWith('data: ')) {
              ev.data = line.slice(6);
              isEvent = true;
            }
          }
          if (isEvent) events.push(ev);
        }
      }
    } catch {
      // aborted
    }
  })();
  return {
    events,
    texts: () => events.filter((e) => e.data).map((e) => JSON.parse(e.data).params.data as string),
    stop: async () => (ac.abort(), await done),
  };
}
