// No value a client or a phone chooses becomes a Prometheus label value of its own: a hostile
// peer must not be able to grow the series /metrics exports (each one costs the scraper's
// memory forever). Read from this process's registry: the relay runs in it.
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { registry } from '../../src/metrics.ts';
import { startTestPhone, startTestRelay, type TestRelay } from '../helpers/relay.ts';
import { challenge, openSocket, pairRaw, signedHeaders } from '../helpers/raw-device.ts';
import { openSession } from '../helpers/raw-mcp.ts';
import { createPhoneServer } from '../../src/device/tools/index.ts';
import { SimPhone } from '../../src/device/sim/model.ts';

let relay: TestRelay;
beforeAll(async () => {
  relay = await startTestRelay();
});
afterAll(async () => {
  await relay?.stop();
});

/** The series of one family, as `name{labels}` without the value. */
async function series(family: string): Promise<string[]> {
  return (await registry.metrics())
    .split('\n')
    .filter((l) => l.startsWith(`${family}{`))
    .map((l) => l.slice(0, l.lastIndexOf(' ')));
}

const value = async (line: string) => {
  const found = (await registry.metrics()).split('\n').find((l) => l.startsWith(`${line} `));
  return found === undefined ? undefined : Number(found.slice(found.lastIndexOf(' ') + 1));
};

it('counts close codes a phone chooses outside the protocol as code="other"', async () => {
  const qr = await relay.pair('closer');
  const phone = await pairRaw(relay.url, qr.code);
  const closesTotal = async () => {
    let sum = 0;
    for (const l of (await registry.metrics()).split('\n'))
      if (l.startsWith('phonebridge_device_closes_total{')) sum += Number(l.slice(l.lastIndexOf(' ') + 1));
    return sum;
  };
  const before = await closesTotal();
  const otherBefore = (await value('phonebridge_device_closes_total{code="other"}')) ?? 0;
  const codes = [4100, 4200, 4999, 1007, 1008];
  for (const code of codes) {
    const s = await openSocket(relay.url, signedHeaders(phone, await challenge(relay.url, phone.deviceId)));
    s.ws.close(code);
    await s.closed;
  }
  // The relay counts a close once uWS reports it, which may be after the phone saw it.
  const deadline = Date.now() + 5000;
  while (Date.now() < deadline && (await closesTotal()) < before + codes.length)
    await new Promise((r) => setTimeout(r, 20));
  expect(await closesTotal()).toBe(before + codes.length);
  const closes = await series('phonebridge_device_closes_total');
  for (const code of codes) expect(closes).not.toContain(`phonebridge_device_closes_total{code="${code}"}`);
  expect(await value('phonebridge_device_closes_total{code="other"}')).toBe(otherBefore + codes.length);
});

it('keeps the series count flat under random methods, tool names, paths and headers', async () => {
  const p = await startTestPhone(relay, () =>
    createPhoneServer({ phone: new SimPhone({ seed: 1 }), deviceId: 'cardinality' }),
  );
  const { token } = await relay.key(p.deviceId);
  const headers = await openSession(relay.mcpUrl, token);
  const rnd = () => randomBytes(6).toString('hex');
  const post = async (body: unknown, extra: Record<string, string> = {}) =>
    (
      await fetch(relay.mcpUrl, { method: 'POST', headers: { ...headers, ...extra }, body: JSON.stringify(body) })
    ).text();
  const round = async () => {
    await post({ jsonrpc: '2.0', id: rnd(), method: `m/${rnd()}` });
    await post({ jsonrpc: '2.0', id: rnd(), method: `notifications/${rnd()}` });
    await post({ jsonrpc: '2.0', id: rnd(), method: 'tools/call', params: { name: `tool_${rnd()}`, arguments: {} } });
    await post({ jsonrpc: '2.0', id: rnd(), method: 'ping' }, { 'mcp-protocol-version': `v-${rnd()}` });
    await post({ jsonrpc: '2.0', id: rnd(), method: 'tools/list' }, { 'x-api-key': `pb_${rnd()}` });
    await post({ jsonrpc: '2.0', id: rnd(), method: 'tools/list' }, { 'mcp-session-id': rnd() });
    await post({ jsonrpc: '2.0', id: rnd(), method: `x\n"\\${rnd()}` }, { 'mcp-protocol-version': '2026-07-28' });
    await (await fetch(`${relay.url}/${rnd()}?q=${rnd()}`, { headers: { 'user-agent': rnd() } })).text();
    await (await fetch(`${relay.mcpUrl}/${rnd()}`, { method: 'PUT', headers })).text();
  };
  // One round binds every label set these requests can reach; more rounds must add none.
  await round();
  const count = async () => (await registry.metrics()).split('\n').filter((l) => l && !l.startsWith('#')).length;
  const first = await count();
  for (let i = 0; i < 60; i++) await round();
  expect(await count()).toBe(first);
  await p.stop();
});
