// Pairing and phone-socket authentication: every bad input has its own answer.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { McpError } from '@modelcontextprotocol/sdk/types.js';
import { connectClient, startTestRelay, waitFor, type TestRelay } from '../helpers/relay.ts';
import {
  challenge,
  completeHandshake,
  openSocket,
  pairRaw,
  postJson,
  signedHeaders,
  type RawPhone,
} from '../helpers/raw-device.ts';
import { generateDeviceKey } from '../../src/crypto/device-auth.ts';
import { createPairing } from '../../src/provisioning.ts';
import { createEnrollment } from '../../src/fleet/enroll.ts';

let relay: TestRelay;
let phone: RawPhone;

beforeAll(async () => {
  relay = await startTestRelay();
  phone = await pairRaw(relay.url, (await relay.pair()).code);
});
afterAll(async () => relay?.stop());

/** `p` opens its socket with a good signature, completes the handshake and is attached; then closes. */
async function connectsAndInitializes(p: RawPhone): Promise<void> {
  const s = await openSocket(relay.url, signedHeaders(p, await challenge(relay.url, p.deviceId)));
  await completeHandshake(s);
  await waitFor(() => !!relay.relay.node.ctx.hub.device(p.deviceId)?.initResult);
  s.ws.close();
  await s.closed;
}

/** An enrollment code of the local account for `maxPhones` phones, valid a minute. */
function enrollmentCode(maxPhones: number) {
  return createEnrollment(relay.relay.store.store, {
    accountId: 'local',
    maxPhones,
    expiresMs: 60_000,
    namePrefix: 'enrolled-',
    relay: relay.url,
  });
}

describe('POST /pair', () => {
  it('pairs once with a good code and returns the device id and relay host', async () => {
    const qr = await relay.pair('good');
    expect(qr.code).toMatch(/^([A-Z2-7]{4}-){7}[A-Z2-7]{4}$/);
    const key = generateDeviceKey();
    const r = await postJson(`${relay.url}/pair`, { code: qr.code, public_key: key.publicKeySpkiBase64, name: 'good' });
    expect(r.status).toBe(200);
    expect(r.json.device_id).toMatch(/^dev_/);
    expect(r.json.relay_host).toBe(new URL(relay.url).host);
    // Used codes are indistinguishable from wrong ones.
    const other = await postJson(
      `${relay.url}/pair`,
      { code: qr.code, public_key: generateDeviceKey().publicKeySpkiBase64, name: 'again' },
      { 'x-forwarded-for': '10.9.9.1' },
    );
    expect(other.status).toBe(403);
    expect(other.json.error).toBe('bad_code');
  });

  it('answers a phone that repeats its pairing (same code, same key: its 200 was lost) with the same device, and pairs nothing new', async () => {
    const qr = await relay.pair('retry');
    const key = generateDeviceKey();
    const body = { code: qr.code, public_key: key.publicKeySpkiBase64, name: 'retry' };
    const first = await postJson(`${relay.url}/pair`, body);
    expect(first.status).toBe(200);
    const repeats = await Promise.all([postJson(`${relay.url}/pair`, body), postJson(`${relay.url}/pair`, body)]);
    for (const r of repeats) expect({ status: r.status, json: r.json }).toEqual({ status: 200, json: first.json });
    const withKey = (await relay.relay.store.store.listDevices()).filter(
      (d) => d.publicKey === key.publicKeySpkiBase64,
    );
    expect(withKey.map((d) => d.id)).toEqual([first.json.device_id]);
    // The phone, with the id all three answers gave, connects.
    await connectsAndInitializes({ key, deviceId: first.json.device_id, relayHost: first.json.relay_host });
  });

  it("answers an enrollment code's phone repeating its pairing with its device, taking no slot", async () => {
    const e = await enrollmentCode(2);
    const [a, b] = [generateDeviceKey(), generateDeviceKey()];
    const pair = (key: typeof a) =>
      postJson(`${relay.url}/pair`, { code: e.qr.code, public_key: key.publicKeySpkiBase64, name: 'x' });
    const first = await pair(a);
    expect(first.status).toBe(200);
    expect((await pair(a)).json).toEqual(first.json);
    const second = await pair(b);
    expect(second.status).toBe(200);
    expect(second.json.device_id).not.toBe(first.json.device_id);
    // Both slots taken, one each; the first phone may still repeat.
    expect((await relay.relay.store.store.fleet.getEnrollment(e.id))?.used).toBe(2);
    expect((await pair(a)).json).toEqual(first.json);
  });

  it("answers copies of an enrollment code's phone's pairing sent at once with one device, taking one slot", async () => {
    const e = await enrollmentCode(3);
    const key = generateDeviceKey();
    const body = { code: e.qr.code, public_key: key.publicKeySpkiBase64, name: 'x' };
    const answers = await Promise.all(Array.from({ length: 4 }, () => postJson(`${relay.url}/pair`, body)));
    for (const r of answers) expect({ status: r.status, json: r.json }).toEqual({ status: 200, json: answers[0].json });
    expect((await relay.relay.store.store.fleet.getEnrollment(e.id))?.used).toBe(1);
  });

  it('refuses an expired code with the same bad_code', async () => {
    const qr = await createPairing(relay.relay.store.store, {
      relay: relay.url,
      now: new Date(Date.now() - 11 * 60_000),
    });
    const r = await postJson(`${relay.url}/pair`, {
      code: qr.code,
      public_key: generateDeviceKey().publicKeySpkiBase64,
      name: 'late',
    });
    expect(r.status).toBe(403);
    expect(r.json.error).toBe('bad_code');
  });

  it('refuses a malformed public key with a specific error', async () => {
    const qr = await relay.pair();
    const r = await postJson(`${relay.url}/pair`, { code: qr.code, public_key: 'bm90IGEga2V5', name: 'x' });
    expect(r.status).toBe(400);
    expect(r.json.error).toBe('bad_public_key');
    // The code was not consumed by a malformed request.
    const ok = await postJson(`${relay.url}/pair`, {
      code: qr.code,
      public_key: generateDeviceKey().publicKeySpkiBase64,
      name: 'x',
    });
    expect(ok.status).toBe(200);
  });

  it('refuses a public_key with characters outside base64 (a NUL, junk) as bad_public_key, not as a store outage, and keeps the code', async () => {
    const qr = await relay.pair();
    const key = generateDeviceKey().publicKeySpkiBase64;
    for (const public_key of [key.slice(0, 10) + '\u0000' + key.slice(10), key.slice(0, 10) + '!*!' + key.slice(10)]) {
      const r = await postJson(
        `${relay.url}/pair`,
        { code: qr.code, public_key, name: 'x' },
        { 'x-forwarded-for': '10.9.8.1' },
      );
      expect({ public_key, status: r.status, error: r.json.error }).toEqual({
        public_key,
        status: 400,
        error: 'bad_public_key',
      });
    }
    // Android's Base64.DEFAULT wraps lines: still the key, stored as plain base64 of its DER.
    const wrapped = key.replace(/(.{76})/g, '$1\n') + '\n';
    const ok = await postJson(`${relay.url}/pair`, { code: qr.code, public_key: wrapped, name: 'x' });
    expect(ok.status).toBe(200);
    expect((await relay.relay.store.store.getDevice(ok.json.device_id))?.publicKey).toBe(key);
  });

  it('keeps control characters out of a phone name (a NUL was a 503; escapes reached the operator terminal) and cuts it at 100 characters, not UTF-16 units', async () => {
    const cases: Array<[string, string]> = [
      ['pixel\u0000 7', 'pixel 7'],
      // What `devices list` would have printed as a clear screen and a forged second row.
      ['x\u001b[2J\ndev_fake  admin\r', 'x [2J dev_fake  admin'],
      ['\u202Egnp.exe\u202C', 'gnp.exe'],
      ['\t\u0085 \u007f', 'phone'],
      ['a' + '😀'.repeat(120), 'a' + '😀'.repeat(99)],
      ['lone \ud800 half', 'lone \ufffd half'],
    ];
    for (const [i, [name, stored]] of cases.entries()) {
      const qr = await relay.pair();
      const r = await postJson(
        `${relay.url}/pair`,
        { code: qr.code, public_key: generateDeviceKey().publicKeySpkiBase64, name },
        { 'x-forwarded-for': `10.9.7.${i}` },
      );
      expect({ name, status: r.status }).toEqual({ name, status: 200 });
      expect({ name, stored: (await relay.relay.store.store.getDevice(r.json.device_id))?.name }).toEqual({
        name,
        stored,
      });
    }
  });

  it("cleans the name the owner gave a code the same way (a hosted dashboard name also reaches the operator's devices list)", async () => {
    const qr = await relay.pair('rack\u001b]0;owned\u0007 one\n');
    const r = await postJson(
      `${relay.url}/pair`,
      { code: qr.code, public_key: generateDeviceKey().publicKeySpkiBase64, name: 'phone' },
      { 'x-forwarded-for': '10.9.6.1' },
    );
    expect(r.status).toBe(200);
    expect((await relay.relay.store.store.getDevice(r.json.device_id))?.name).toBe('rack ]0;owned one');
  });

  it('answers malformed JSON with 400', async () => {
    const r = await postJson(`${relay.url}/pair`, '{"code":');
    expect(r.status).toBe(400);
    expect(r.json.error).toBe('bad_request');
  });

  it('answers a body that is not the {code, public_key, name} object with 400 bad_request, not counted as a failure', async () => {
    // A fresh relay: its failure window starts empty, so six uncounted refusals leave a good code working.
    const r2 = await startTestRelay();
    try {
      const key = generateDeviceKey().publicKeySpkiBase64;
      const bodies: unknown[] = [
        [],
        [{ code: 'AAAA-AAAA-AAAA-AAAA-AAAA-AAAA-AAAA-AAAA', public_key: key }],
        { public_key: key, name: 'no code' },
        { pairing_code: 'AAAA-AAAA-AAAA-AAAA-AAAA-AAAA-AAAA-AAAA', public_key: key },
        { code: 12345678, public_key: key },
        { code: null, public_key: key },
      ];
      for (const body of bodies) {
        const r = await postJson(`${r2.url}/pair`, body);
        expect({ body, status: r.status, error: r.json.error }).toEqual({ body, status: 400, error: 'bad_request' });
      }
      const good = await r2.pair();
      const ok = await postJson(`${r2.url}/pair`, { code: good.code, public_key: key, name: 'x' });
      expect(ok.status).toBe(200);
    } finally {
      await r2.stop();
    }
  });

  it('rate-limits the sixth failure within ten minutes from one address (429), even with a good code', async () => {
    // X-Forwarded-For is ignored without --trust-proxy, so every try here counts against 127.0.0.1;
    // use a second relay so the other tests' failures do not interfere.
    const r2 = await startTestRelay();
    try {
      const key = generateDeviceKey().publicKeySpkiBase64;
      for (let i = 0; i < 5; i++) {
        const r = await postJson(
          `${r2.url}/pair`,
          { code: 'AAAA-AAAA-AAAA-AAAA-AAAA-AAAA-AAAA-AAAA', public_key: key, name: 'x' },
          { 'x-forwarded-for': `10.0.0.${i}` },
        );
        expect(r.status).toBe(403);
      }
      const good = await r2.pair();
      const sixth = await postJson(`${r2.url}/pair`, { code: good.code, public_key: key, name: 'x' });
      expect(sixth.status).toBe(429);
      expect(sixth.json.error).toBe('rate_limited');
      expect(sixth.headers.get('retry-after')).toBeTruthy();
    } finally {
      await r2.stop();
    }
  });
});

describe('phone socket authentication', () => {
  it('challenges unknown device ids too', async () => {
    const r = await postJson(`${relay.url}/device/challenge`, { device_id: 'dev_nobody' });
    expect(r.status).toBe(200);
    expect(Buffer.from(r.json.nonce, 'base64url')).toHaveLength(32);
    expect(r.json.expires_in).toBe(60);
  });

  it('accepts a good signature and initializes the phone', async () => {
    await connectsAndInitializes(phone);
  });

  it('closes with 4003 on a bad signature', async () => {
    const other = generateDeviceKey();
    const s = await openSocket(
      relay.url,
      signedHeaders(phone, await challenge(relay.url, phone.deviceId), { key: other }),
    );
    const c = await s.closed;
    expect(c.code).toBe(4003);
    expect(c.reason).toBe('bad signature');
  });

  it('closes with 4003 when the signature binds another relay host', async () => {
    const s = await openSocket(
      relay.url,
      signedHeaders(phone, await challenge(relay.url, phone.deviceId), { host: 'evil.example:443' }),
    );
    expect((await s.closed).code).toBe(4003);
  });

  it('closes with 4003 on a clock skew over 60 s', async () => {
    const s = await openSocket(
      relay.url,
      signedHeaders(phone, await challenge(relay.url, phone.deviceId), { ts: Math.floor(Date.now() / 1000) - 61 }),
    );
    const c = await s.closed;
    expect(c.code).toBe(4003);
    expect(c.reason).toMatch(/skew/);
  });

  it('closes with 4003 on a reused nonce', async () => {
    const nonce = await challenge(relay.url, phone.deviceId);
    const first = await openSocket(relay.url, signedHeaders(phone, nonce));
    await completeHandshake(first);
    const second = await openSocket(relay.url, signedHeaders(phone, nonce));
    const c = await second.closed;
    expect(c.code).toBe(4003);
    expect(c.reason).toMatch(/nonce/);
    first.ws.close();
    await first.closed;
  });

  it('closes with 4003 when headers are missing', async () => {
    const s = await openSocket(relay.url, { 'X-Device-Id': phone.deviceId });
    expect((await s.closed).code).toBe(4003);
  });

  it('closes with 4004 a phone removed while its upgrade was being checked, and does not attach it', async () => {
    const removed = await pairRaw(relay.url, (await relay.pair()).code);
    const ctx = relay.relay.node.ctx;
    const keys = ctx.devices.keys;
    const lookup = keys.get.bind(keys);
    // The removal lands between the key lookup (which still found the phone) and the socket
    // opening: the order a removal from the CLI or another node can take.
    keys.get = async (id) => {
      const found = await lookup(id);
      if (id === removed.deviceId) {
        expect(await relay.relay.store.store.removeDevice(id)).toBe(true);
        await relay.relay.node.control({ type: 'device_removed', deviceId: id });
        await waitFor(() => ctx.hub.isRevoked({ deviceId: id }));
      }
      return found;
    };
    try {
      const s = await openSocket(relay.url, signedHeaders(removed, await challenge(relay.url, removed.deviceId)));
      expect(await s.closed).toEqual({ code: 4004, reason: 'device removed' });
      expect(ctx.hub.device(removed.deviceId)).toBeUndefined();
      expect(s.frames).toEqual([]);
    } finally {
      keys.get = lookup;
    }
  });

  it('supersedes the older socket with 4001', async () => {
    const a = await openSocket(relay.url, signedHeaders(phone, await challenge(relay.url, phone.deviceId)));
    await completeHandshake(a);
    const b = await openSocket(relay.url, signedHeaders(phone, await challenge(relay.url, phone.deviceId)));
    expect((await a.closed).code).toBe(4001);
    await completeHandshake(b);
    expect(relay.relay.node.ctx.hub.device(phone.deviceId)).toBeTruthy();
    b.ws.close();
    await b.closed;
  });

  it('passes a frame of exactly 256 KiB and closes with 1009 on 256 KiB + 1', async () => {
    const s = await openSocket(relay.url, signedHeaders(phone, await challenge(relay.url, phone.deviceId)));
    await completeHandshake(s);
    const frameOf = (bytes: number) => {
      const head = '{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"';
      const tail = '"}}';
      return head + 'x'.repeat(bytes - head.length - tail.length) + tail;
    };
    const exact = frameOf(256 * 1024);
    expect(Buffer.byteLength(exact)).toBe(262144);
    s.ws.send(exact);
    // Still open: the relay answers a ping request after the big frame.
    s.ws.send(JSON.stringify({ jsonrpc: '2.0', id: 'p1', method: 'ping' }));
    const pong = await s.nextFrame((f) => f.id === 'p1');
    expect(pong.result).toEqual({});
    s.ws.send(frameOf(256 * 1024 + 1));
    const c = await s.closed;
    expect(c.code).toBe(1009);
  });

  it('fails the call in flight with relay_error when the phone answers over 256 KiB: 1009, or past 1 MiB a dropped socket', async () => {
    const { token } = await relay.key(phone.deviceId);
    for (const [bytes, code] of [
      [256 * 1024 + 1, 1009],
      [2 * 1024 * 1024, 1006],
    ]) {
      const s = await openSocket(relay.url, signedHeaders(phone, await challenge(relay.url, phone.deviceId)));
      await completeHandshake(s);
      const list = await s.nextFrame((f) => f.method === 'tools/list');
      s.ws.send(JSON.stringify({ jsonrpc: '2.0', id: list.id, result: { tools: [] } }));
      const { client } = await connectClient(relay.mcpUrl, token);
      const ping = client.ping().catch((e: unknown) => e);
      const req = await s.nextFrame((f) => f.method === 'ping');
      s.ws.send(JSON.stringify({ jsonrpc: '2.0', id: req.id, result: { pad: 'x'.repeat(bytes) } }));
      const err = await ping;
      expect(err).toBeInstanceOf(McpError);
      expect({ bytes, code: (err as McpError).code, message: (err as McpError).message }).toMatchObject({
        bytes,
        code: -31000,
        message: expect.stringMatching(/the phone sent a frame over the 256 KiB limit/),
      });
      expect((await s.closed).code).toBe(code);
      await client.close();
    }
  });

  it('closes with 1011 when the phone refuses initialize', async () => {
    const s = await openSocket(relay.url, signedHeaders(phone, await challenge(relay.url, phone.deviceId)));
    const init = await s.nextFrame((f) => f.method === 'initialize');
    s.ws.send(JSON.stringify({ jsonrpc: '2.0', id: init.id, error: { code: -32603, message: 'no' } }));
    const c = await s.closed;
    expect(c.code).toBe(1011);
    expect(c.reason).toBe('initialize failed');
  });

  it('closes with 1011 when the initialize result is not an object, and keeps the cached result', async () => {
    // A good handshake first: its result is what clients are answered from while the phone is away.
    const good = await openSocket(relay.url, signedHeaders(phone, await challenge(relay.url, phone.deviceId)));
    await completeHandshake(good);
    await waitFor(() => !!relay.relay.node.ctx.hub.device(phone.deviceId)?.initResult);
    good.ws.close();
    await good.closed;
    await waitFor(() => !relay.relay.node.ctx.hub.device(phone.deviceId));
    for (const result of [5, 'x', [], true]) {
      const s = await openSocket(relay.url, signedHeaders(phone, await challenge(relay.url, phone.deviceId)));
      const init = await s.nextFrame((f) => f.method === 'initialize');
      s.ws.send(JSON.stringify({ jsonrpc: '2.0', id: init.id, result }));
      expect({ result, close: await s.closed }).toEqual({ result, close: { code: 1011, reason: 'initialize failed' } });
    }
    const { token } = await relay.key(phone.deviceId);
    const r = await postJson(
      relay.mcpUrl,
      {
        jsonrpc: '2.0',
        id: 1,
        method: 'initialize',
        params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'c', version: '1' } },
      },
      { 'x-api-key': token, accept: 'application/json, text/event-stream' },
    );
    expect(r.json.result).toEqual({
      protocolVersion: '2025-11-25',
      capabilities: { tools: {} },
      serverInfo: { name: 'raw', version: '1' },
    });
  });

  it('answers phone-originated requests with -32601 and never forwards them', async () => {
    const s = await openSocket(relay.url, signedHeaders(phone, await challenge(relay.url, phone.deviceId)));
    await completeHandshake(s);
    s.ws.send(JSON.stringify({ jsonrpc: '2.0', id: 7, method: 'sampling/createMessage', params: {} }));
    const r = await s.nextFrame((f) => f.id === 7);
    expect(r.error.code).toBe(-32601);
    s.ws.close();
    await s.closed;
  });
});
