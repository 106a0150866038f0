// What a client's messages may do at the phone, on one node and across two: every method has a
// scope and needs the capability the phone advertised (docs/decisions/0030-method-scopes.md),
// on both /mcp eras; and no message carries a caller context the client wrote. An offline
// phone's requests get the same refusals, from the capabilities it last advertised
// (docs/decisions/0217-offline-refusals-from-cached-capabilities.md).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestPhone, startTestRelay, tempDir, waitFor, type TestPhone, type TestRelay } from '../helpers/relay.ts';
import { startTwoNodes, type TwoNodes } from '../helpers/two-nodes.ts';
import { createSurfaceServer, type SurfaceLog } from '../fixtures/surface-server.ts';
import type { Scope } from '../../src/store/types.ts';
import { postJson } from '../helpers/raw-device.ts';
import { DeviceAgent, silentLogger } from '../../src/device/agent/index.ts';

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

/** One answer, as a client can compare it: its HTTP status, its error (or that it succeeded), its challenge. */
const outcome = (r: Awaited<ReturnType<typeof post>>) => ({
  status: r.status,
  error: r.json.error ?? (r.json.result ? 'result' : r.json),
  challenge: r.challenge,
});

const OFFLINE_CASES: Array<{ key: 'full' | 'lease' | 'read'; method: string; params?: object; stateless?: true }> = [
  // Refused by the phone's socket: the same from its cached capabilities when it is offline.
  { key: 'full', method: 'completion/complete', params: { ref: { type: 'ref/prompt', name: 'greet' } } },
  { key: 'full', method: 'resources/subscribe', params: { uri: 'phone://screen' } },
  { key: 'full', method: 'logging/setLevel', params: { level: 'debug' } },
  { key: 'full', method: 'phone/anything' },
  { key: 'lease', method: 'resources/read', params: { uri: 'phone://screen' } },
  { key: 'lease', method: 'prompts/list' },
  {
    key: 'full',
    method: 'completion/complete',
    params: { ref: { type: 'ref/prompt', name: 'greet' }, argument: { name: 'a', value: 'b' } },
    stateless: true,
  },
  { key: 'lease', method: 'resources/read', params: { uri: 'phone://screen' }, stateless: true },
];
/** Served by the phone: device_offline while it is away. */
const SERVED_CASES: Array<{ method: string; params?: object }> = [
  { method: 'resources/read', params: { uri: 'phone://screen' } },
  { method: 'tools/call', params: { name: 'look', arguments: {} } },
  { method: 'ping' },
];

interface OfflineSetup {
  phoneNode: TestRelay;
  client: TestRelay;
  stop(): Promise<void>;
}

function offlineSuite(name: string, start: () => Promise<OfflineSetup>) {
  describe(`${name}: a phone that is offline`, () => {
    let s: OfflineSetup;
    beforeAll(async () => {
      s = await start();
    });
    afterAll(async () => {
      await s?.stop();
    });

    async function answers(tokens: Record<'full' | 'lease' | 'read', string>) {
      const calls = {
        full: await session(s.client.url, tokens.full),
        lease: await session(s.client.url, tokens.lease),
        read: await session(s.client.url, tokens.read),
      };
      const refused = [];
      for (const c of OFFLINE_CASES)
        refused.push(
          outcome(
            c.stateless
              ? await stateless(s.client.url, tokens[c.key], c.method, { ...c.params })
              : await calls[c.key](c.method, c.params),
          ),
        );
      const served = [];
      for (const c of SERVED_CASES) served.push(outcome(await calls.read(c.method, c.params)));
      return { refused, served };
    }

    it('refuses what the phone refuses connected, the same way (-32601, 403 + challenge); what it serves is device_offline', async () => {
      const log: SurfaceLog = { requests: [], notifications: [] };
      const phone = await startTestPhone(s.phoneNode, () => createSurfaceServer(log));
      const store = s.phoneNode.relay.store.store;
      const tokens = {
        full: (await s.phoneNode.key(phone.deviceId)).token,
        lease: (await s.phoneNode.key(phone.deviceId, ['devices:lease'])).token,
        read: (await s.phoneNode.key(phone.deviceId, ['devices:read'])).token,
      };
      const connected = await answers(tokens);
      expect(connected.served.map((o) => o.error)).toEqual(['result', 'result', 'result']);
      await waitFor(async () => !!(await store.getDevice(phone.deviceId))?.initResult, 5000, 'the cached initialize');
      await phone.stop();
      await waitFor(
        async () =>
          !s.phoneNode.relay.node.ctx.hub.device(phone.deviceId) &&
          !(await s.phoneNode.relay.node.ctx.bus.ownerOf(phone.deviceId)),
        5000,
        'the phone offline',
      );
      const before = log.requests.length;
      const offline = await answers(tokens);
      expect(offline.refused).toEqual(connected.refused);
      for (const o of offline.served) expect(o.error).toMatchObject({ code: -31001, data: { code: 'device_offline' } });
      expect(log.requests.length).toBe(before);
    });

    it('a phone that never connected: only what no phone is asked is refused; the rest is device_offline', async () => {
      const qr = await s.phoneNode.pair('never');
      const id = await DeviceAgent.pair({ stateDir: tempDir('pb-phone-'), qr, name: 'never', log: silentLogger });
      const token = (await s.phoneNode.key(id.device_id)).token;
      const call = await session(s.client.url, token);
      expect((await call('phone/anything')).json.error).toMatchObject({
        code: -32601,
        message: 'Method not found: phone/anything',
      });
      // Its capabilities are unknown: whether it offers completions is for it to say.
      expect((await call('completion/complete', { ref: { type: 'ref/prompt', name: 'x' } })).json.error).toMatchObject({
        code: -31001,
        data: { code: 'device_offline' },
      });
    });
  });
}

offlineSuite('one node', async () => {
  const relay = await startTestRelay();
  return { phoneNode: relay, client: relay, stop: () => relay.stop() };
});

offlineSuite('two nodes over Redis (phone on a, client on b)', async () => {
  const nodes = await startTwoNodes();
  return { phoneNode: nodes.a, client: nodes.b, stop: () => nodes.stop() };
});
