// An MCP session for a benchmark's load generator: initialize, notifications/initialized and
// one `echo` call that must come back, through fetch. What it returns are the headers every
// later call of the session carries (relay-overhead, cross-node-ab).
import { PROTOCOL } from './mcp-client.ts';

async function post(url: string, headers: Record<string, string>, body: unknown) {
  const r = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', ...headers },
    body: JSON.stringify(body),
  });
  return { status: r.status, headers: r.headers, text: await r.text() };
}

/** The session's headers, `headers` (credentials) included; throws if a step fails. */
export async function probedSession(
  url: string,
  headers: Record<string, string>,
  clientName: string,
): Promise<Record<string, string>> {
  const init = await post(url, headers, {
    jsonrpc: '2.0',
    id: 0,
    method: 'initialize',
    params: { protocolVersion: PROTOCOL, capabilities: {}, clientInfo: { name: clientName, version: '1' } },
  });
  if (init.status !== 200) throw new Error(`initialize at ${url}: HTTP ${init.status} ${init.text.slice(0, 200)}`);
  const sid = init.headers.get('mcp-session-id');
  if (!sid) throw new Error(`initialize at ${url}: no Mcp-Session-Id`);
  const h = {
    ...headers,
    'content-type': 'application/json',
    accept: 'application/json, text/event-stream',
    'mcp-session-id': sid,
    'mcp-protocol-version': PROTOCOL,
  };
  await post(url, h, { jsonrpc: '2.0', method: 'notifications/initialized' });
  const probe = await post(url, h, {
    jsonrpc: '2.0',
    id: 1,
    method: 'tools/call',
    params: { name: 'echo', arguments: { text: 'probe' } },
  });
  if (probe.status !== 200 || !probe.text.includes('probe'))
    throw new Error(`probe call at ${url}: HTTP ${probe.status} ${probe.text.slice(0, 200)}`);
  return h;
}
