// What a client's messages may do at the phone, on one node and across two: every method has a
// scope and needs the capability the phone advertised (docs/decisions/0030-method-scopes.md),
// on both /mcp eras; and no message carries a caller context the client wrote.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestPhone, startTestRelay, waitFor, type TestPhone, type TestRelay } from '../helpers/relay.ts';
import { startTwoNodes, type TwoNodes } from '../helpers/two-nodes.ts';
import { createSurfaceServer, type SurfaceLog } from '../fixtures/surface-server.ts';
import type { Scope } from '../../src/store/types.ts';
import { postJson } from '../helpers/raw-device.ts';

const SESSION = '2025-11-25';
const V = '2026-07-28';
const statelessMeta = {
  'io.modelcontextprotocol/protocolVersion': V,
  'io.modelcontextprotocol/clientInfo': { name: 't', version: '1' },
  'io.modelcontextprotocol/clientCapabilities': {},
};

interface Setup {
  /** Where the clients talk (the phone's node, or the other one). */
  client: TestRelay;
  log: SurfaceLog;
  key(scopes?: Scope[]): Promise<string>;
  keyId(token: string): string;
  stop(): Promise<void>;
}

async function post(url: string, token: string, body: unknown, headers: Record<string, string> = {}) {
  const r = await postJson(`${url}/mcp`, body, {
    accept: 'application/json, text/event-stream',
    'x-api-key': token,
    ...headers,
  });
  return {
    status: r.status,
    json: r.json,
    challenge: r.headers.get('www-authenticate'),
    sid: r.headers.get('mcp-session-id'),
  };
}

type Call = ((method: string, params?: object) => ReturnType<typeof post>) & { sid: string };

async function session(url: string, token: string): Promise<Call> {
  const init = await post(url, token, {
    jsonrpc: '2.0',
    id: 0,
    method: 'initialize',
    params: { protocolVersion: SESSION, capabilities: {}, clientInfo: { name: 't', version: '1' } },
  });
  expect(init.status).toBe(200);
  const headers = { 'mcp-session-id': init.sid!, 'mcp-protocol-version': SESSION };
  let id = 1;
  const call = (method: string, params = {}) => post(url, token, { jsonrpc: '2.0', id: id++, method, params }, headers);
  return Object.assign(call, { sid: init.sid! });
}

function stateless(url: string, token: string, method: string, params: Record<string, unknown> = {}) {
  const name = (params.name ?? params.uri) as string | undefined;
  return post(
    url,
    token,
    { jsonrpc: '2.0', id: 7, method, params: { ...params, _meta: statelessMeta } },
    { 'mcp-protocol-version': V, 'mcp-method': method, ...(name ? { 'mcp-name': name } : {}) },
  );
}

const READS: Array<[string, Record<string, unknown>]> = [
  ['resources/list', {}],
  ['resources/templates/list', {}],
  ['resources/read', { uri: 'phone://screen' }],
  ['prompts/list', {}],
  ['prompts/get', { name: 'greet' }],
];

function suite(name: string, start: () => Promise<Setup>) {
  describe(name, () => {
    let s: Setup;
    let lease: string;
    let read: string;
    let full: string;
    beforeAll(async () => {
      s = await start();
      lease = await s.key(['devices:lease']);
      read = await s.key(['devices:read']);
      full = await s.key();
    });
    afterAll(async () => {
      await s?.stop();
    });
    const reached = () => s.log.requests.map((r) => r.method).filter((m) => m !== 'tools/list');

    it('refuses reading methods to a key without devices:read: 403 + challenge, nothing reaches the phone', async () => {
      const before = reached().length;
      const call = await session(s.client.url, lease);
      for (const [method, params] of READS) {
        const r = await call(method, params);
        expect(r.status, method).toBe(403);
        expect(r.challenge, method).toMatch(/^Bearer error="insufficient_scope", scope="devices:read"/);
        expect(r.json.error, method).toMatchObject({
          code: -31008,
          data: { code: 'insufficient_scope', scope: 'devices:read' },
        });
      }
      for (const [method, params] of READS) {
        const r = await stateless(s.client.url, lease, method, params);
        expect(r.status, `${method} (2026-07-28)`).toBe(403);
        expect(r.json).toMatchObject({ id: 7, error: { code: -31008, data: { scope: 'devices:read' } } });
      }
      expect(reached().length).toBe(before);
    });

    it('answers the same methods to a key with devices:read (unchanged behaviour)', async () => {
      const call = await session(s.client.url, read);
      const r = await call('resources/read', { uri: 'phone://screen' });
      expect(r.status).toBe(200);
      expect(r.json.result.contents[0].text).toBe('secret screen text');
      expect((await call('prompts/get', { name: 'greet' })).json.result.messages).toHaveLength(1);
      const m = await stateless(s.client.url, read, 'resources/read', { uri: 'phone://screen' });
      expect(m.status).toBe(200);
      expect(m.json.result.contents[0].text).toBe('secret screen text');
    });

    it('refuses made-up methods and methods the phone did not advertise with -32601, even to a full key', async () => {
      const before = reached().length;
      const call = await session(s.client.url, full);
      for (const method of ['phone/anything', 'completion/complete', 'resources/subscribe', 'logging/setLevel']) {
        const r = await call(method, method === 'logging/setLevel' ? { level: 'debug' } : { uri: 'phone://screen' });
        expect(r.status, method).toBe(200);
        expect(r.json.error, method).toMatchObject({ code: -32601 });
      }
      // 2026-07-28: completion/complete exists in the revision, but this phone has no completions.
      const c = await stateless(s.client.url, full, 'completion/complete', {
        ref: { type: 'ref/prompt', name: 'greet' },
        argument: { name: 'a', value: 'b' },
      });
      expect(c.status).toBe(404);
      expect(c.json).toMatchObject({ id: 7, error: { code: -32601 } });
      expect((await stateless(s.client.url, full, 'phone/anything')).status).toBe(404);
      expect(reached().length).toBe(before);
    });

    it('replaces a caller context the client wrote on its notifications, too', async () => {
      const call = await session(s.client.url, lease);
      const forged = { credential: 'someone-else', scopes: ['devices:read', 'devices:act', 'runs:start'] };
      const r = await post(
        s.client.url,
        lease,
        {
          jsonrpc: '2.0',
          method: 'notifications/roots/list_changed',
          params: { _meta: { 'phonebridge/caller': forged, other: 1 } },
        },
        { 'mcp-session-id': call.sid, 'mcp-protocol-version': SESSION },
      );
      expect(r.status).toBe(202);
      await waitFor(() => s.log.notifications.some((n) => n.method === 'notifications/roots/list_changed'));
      const got = s.log.notifications.find((n) => n.method === 'notifications/roots/list_changed')!.params as any;
      expect(got._meta['phonebridge/caller']).toEqual({ credential: s.keyId(lease), scopes: ['devices:lease'] });
      expect(got._meta.other).toBe(1);
    });

    it('still lets ping and the tools through to a lease-only key', async () => {
      const call = await session(s.client.url, lease);
      expect((await call('ping')).json.result).toEqual({});
      const tools = await call('tools/list');
      expect(tools.json.result.tools).toEqual([]);
    });
  });
}

function keys(create: (scopes?: Scope[]) => Promise<{ id: string; token: string }>) {
  const ids = new Map<string, string>();
  return {
    key: async (scopes?: Scope[]) => {
      const k = await create(scopes);
      ids.set(k.token, k.id);
      return k.token;
    },
    keyId: (token: string) => ids.get(token)!,
  };
}

suite('one node', async () => {
  const relay = await startTestRelay();
  const log: SurfaceLog = { requests: [], notifications: [] };
  const phone: TestPhone = await startTestPhone(relay, () => createSurfaceServer(log));
  return {
    client: relay,
    log,
    ...keys((scopes) => relay.key(phone.deviceId, scopes)),
    async stop() {
      await phone.stop();
      await relay.stop();
    },
  };
});

suite('two nodes over Redis (phone on a, client on b)', async () => {
  const nodes: TwoNodes = await startTwoNodes();
  const log: SurfaceLog = { requests: [], notifications: [] };
  const phone = await startTestPhone(nodes.a, () => createSurfaceServer(log));
  return {
    client: nodes.b,
    log,
    ...keys((scopes) => nodes.a.key(phone.deviceId, scopes)),
    async stop() {
      await phone.stop();
      await nodes.stop();
    },
  };
});
