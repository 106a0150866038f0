// `promtool check metrics` (Prometheus's own linter: names, types, suffixes, HELP) over a real
// relay's admin /metrics after real traffic: a relay on Redis, a phone paired, a tool called
// through the official SDK client, so the labelled series exist too. The Node process totals
// that prom-client names `…_total` are gauges, exported as `…_all` instead
// (docs/decisions/0228-process-totals-are-not-counters.md); each is the sum of its family by type.
// promtool ships in Debian's `prometheus` package; without it (PROMTOOL names another copy)
// the lint is skipped.
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { connectClient, startTestPhone, startTestRelay, type TestPhone, type TestRelay } from '../helpers/relay.ts';
import { createEchoServer } from '../fixtures/echo-server.ts';

const PROMTOOL = [process.env.PROMTOOL, '/usr/bin/promtool'].find((p): p is string => !!p && existsSync(p));
const REDIS_URL = process.env.PHONEBRIDGE_TEST_REDIS_URL ?? 'redis://127.0.0.1:6379';

let relay: TestRelay;
let phone: TestPhone;
let scrape: string;

beforeAll(async () => {
  relay = await startTestRelay(['--redis-url', REDIS_URL, '--redis-prefix', `pbl:${randomBytes(4).toString('hex')}:`]);
  phone = await startTestPhone(relay, () => createEchoServer());
  const { client } = await connectClient(relay.mcpUrl, (await relay.key(phone.deviceId)).token);
  const answer = await client.callTool({ name: 'echo', arguments: { text: 'hi' } });
  expect(answer.content).toEqual([{ type: 'text', text: 'hi' }]);
  await client.close();
  scrape = await (await fetch(`http://127.0.0.1:${relay.relay.node.adminPort}/metrics`)).text();
});
afterAll(async () => {
  await phone?.stop();
  await relay?.stop();
});

function promtool(input: string): Promise<{ code: number | null; output: string }> {
  return new Promise((resolve, reject) => {
    const p = spawn(PROMTOOL!, ['check', 'metrics'], { stdio: ['pipe', 'pipe', 'pipe'] });
    let output = '';
    p.stdout.on('data', (d: Buffer) => (output += d.toString()));
    p.stderr.on('data', (d: Buffer) => (output += d.toString()));
    p.on('error', reject);
    p.on('close', (code) => resolve({ code, output }));
    p.stdin.end(input);
  });
}

/** The values of a family's series in the scrape, by exact family name. */
const values = (text: string, name: string) =>
  [...text.matchAll(new RegExp(`^${name}(?:\\{[^}]*\\})? (\\S+)$`, 'gm'))].map((m) => Number(m[1]));

it.skipIf(!PROMTOOL)('the scrape passes promtool check metrics without a finding', async () => {
  // The traffic is in the scrape (labelled series included), and so is the bus's health.
  expect(scrape).toMatch(/^phonebridge_mcp_requests_total\{method="tools\/call",outcome="ok",era="session"\} 1$/m);
  expect(scrape).toMatch(/^phonebridge_redis_up 1$/m);
  expect(await promtool(scrape)).toEqual({ code: 0, output: '' });
});

it('exports the process totals as gauges without _total, each the sum of its family by type', () => {
  for (const kind of ['handles', 'requests', 'resources']) {
    const family = `phonebridge_process_nodejs_active_${kind}`;
    expect(scrape, kind).not.toContain(`${family}_total`);
    expect(scrape, kind).toContain(`# TYPE ${family}_all gauge\n`);
    const all = values(scrape, `${family}_all`);
    expect(all, kind).toHaveLength(1);
    expect(all[0], kind).toBe(values(scrape, family).reduce((a, b) => a + b, 0));
  }
  // A relay listening on two ports and holding a phone socket has handles and resources.
  expect(values(scrape, 'phonebridge_process_nodejs_active_handles_all')[0]).toBeGreaterThan(2);
  expect(values(scrape, 'phonebridge_process_nodejs_active_resources_all')[0]).toBeGreaterThan(2);
});
