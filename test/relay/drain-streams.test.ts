// Slow answers (SSE streams on the POST) that cross the start of a drain stay well-formed: a
// drain ends every response with `Connection: close`, which a streamed response can only say
// in its headers. Raw HTTP with keep-alive, as a load balancer's pooled connections behave.
import { Agent, request } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestPhone, startTestRelay, type TestPhone, type TestRelay } from '../helpers/relay.ts';
import { createEchoServer, type EchoServerControl } from '../fixtures/echo-server.ts';
import { lastSseMessage, outcome, PROTOCOL } from '../cluster/harness.ts';
import { sample } from '../helpers/metrics.ts';

let r: TestRelay;
let phone: TestPhone;
const control: EchoServerControl = { calls: [], cancellations: 0 };
const agent = new Agent({ keepAlive: true });
/** Another client: its idle keep-alive connection carries a request into the drain. */
const late = new Agent({ keepAlive: true, maxSockets: 1 });
let headers: Record<string, string>;

beforeAll(async () => {
  r = await startTestRelay(['--drain-ms', '10000']);
  phone = await startTestPhone(r, () => createEchoServer(control));
  const token = (await r.key(phone.deviceId)).token;
  headers = { 'content-type': 'application/json', accept: 'application/json, text/event-stream', 'x-api-key': token };
  const init = await post({
    jsonrpc: '2.0',
    id: 0,
    method: 'initialize',
    params: { protocolVersion: PROTOCOL, capabilities: {}, clientInfo: { name: 'raw', version: '1' } },
  });
  headers = { ...headers, 'mcp-session-id': String(init.headers['mcp-session-id']), 'mcp-protocol-version': PROTOCOL };
}, 60_000);

afterAll(async () => {
  agent.destroy();
  late.destroy();
  await phone?.stop();
  await r?.stop();
});

interface Answer {
  headers: Record<string, string | string[] | undefined>;
  /** Resolves with the whole body, or rejects if it is malformed. */
  body: Promise<string>;
}

/** POSTs one message; resolves when the response headers arrive. */
function post(body: unknown, via = agent): Promise<Answer> {
  const payload = JSON.stringify(body);
  return new Promise((resolve, reject) => {
    const req = request(
      `${r.url}/mcp`,
      { method: 'POST', agent: via, headers: { ...headers, 'content-length': String(Buffer.byteLength(payload)) } },
      (res) => {
        const chunks: Buffer[] = [];
        const text = new Promise<string>((ok, bad) => {
          res.on('data', (c: Buffer) => chunks.push(c));
          res.on('error', bad);
          res.on('end', () => ok(Buffer.concat(chunks).toString('utf8')));
        });
        text.catch(() => {}); // read by the test
        resolve({ headers: res.headers, body: text });
      },
    );
    req.on('error', reject);
    req.end(payload);
  });
}

const sleepCall = (id: number, ms: number, via = agent) =>
  post({ jsonrpc: '2.0', id, method: 'tools/call', params: { name: 'sleep', arguments: { ms } } }, via);

describe('a drain while slow answers stream', () => {
  it('a stream opened before the drain and one opened during it both end well-formed', async () => {
    await (
      await post({ jsonrpc: '2.0', id: 9, method: 'tools/list' }, late)
    ).body; // an idle connection
    // The first call becomes a stream (its answer takes over a second) before the drain.
    const before = await sleepCall(1, 2500);
    expect(before.headers['content-type']).toBe('text/event-stream');
    // The second arrives once the node drains (on the idle connection: the listener is closed),
    // so its stream opens during the drain; both answers are written during it.
    expect(await sample('phonebridge_draining')).toBe(0);
    const drained = r.relay.node.drain();
    // The gauges as the next scrape reads them: draining, with the first call still pending.
    expect(await sample('phonebridge_draining')).toBe(1);
    expect(await sample('phonebridge_pending_requests', '{role="origin"}')).toBe(1);
    expect(await sample('phonebridge_pending_requests', '{role="phone"}')).toBe(1);
    const during = await sleepCall(2, 1500, late);
    expect(during.headers['content-type']).toBe('text/event-stream');
    expect(control.calls.map((c) => c.name)).toEqual(['sleep', 'sleep']);

    expect(outcome(lastSseMessage(await before.body))).toBe('slept 2500');
    expect(outcome(lastSseMessage(await during.body))).toBe('slept 1500');
    // The one that opened while draining told the client not to reuse its connection.
    expect(during.headers.connection).toBe('close');
    expect(before.headers.connection).not.toBe('close');
    await drained;
    // Its last act, when it closes: a goodbye (to no one here, the only node).
    expect(await sample('phonebridge_goodbyes_total', '{direction="sent"}')).toBe(0);
    await r.relay.node.close();
    expect(await sample('phonebridge_goodbyes_total', '{direction="sent"}')).toBe(1);
  }, 30_000);
});
