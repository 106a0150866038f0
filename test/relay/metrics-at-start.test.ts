// Every metric family docs/OPERATIONS.md documents is on a node's first scrape, before any
// traffic: at zero for the label values known in advance (dashboards show 0, not "No data").
// phonebridge_redis_up is the one family that exists only with Redis (documented so).
import { afterAll, expect, it } from 'vitest';
import { readFileSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { startTestRelay, type TestRelay } from '../helpers/relay.ts';

const OPERATIONS = fileURLToPath(new URL('../../docs/OPERATIONS.md', import.meta.url));
const relays: TestRelay[] = [];
afterAll(async () => {
  for (const r of relays) await r.stop();
});

function documentedFamilies(): string[] {
  const doc = readFileSync(OPERATIONS, 'utf8');
  return [...doc.matchAll(/^\| `(phonebridge_[a-z_]+)`/gm)].map((m) => m[1]);
}

async function exportedFamilies(relay: TestRelay): Promise<{ families: Set<string>; text: string }> {
  const text = await (await fetch(`http://127.0.0.1:${relay.relay.node.adminPort}/metrics`)).text();
  const families = new Set(
    [...text.matchAll(/^(phonebridge_[a-z_]+?)(?:_bucket|_count|_sum)?[{ ]/gm)].map((m) => m[1]),
  );
  return { families, text };
}

it('a fresh node exports every documented family, at zero; with Redis its health too', async () => {
  const documented = documentedFamilies();
  expect(documented.length).toBeGreaterThanOrEqual(25);

  const alone = await startTestRelay();
  relays.push(alone);
  const { families, text } = await exportedFamilies(alone);
  expect(documented.filter((f) => !families.has(f))).toEqual(['phonebridge_redis_up']);
  // The label values known in advance, at zero.
  expect(text).toMatch(/^phonebridge_mcp_requests_total\{method="tools\/call",outcome="error",era="stateless"\} 0$/m);
  expect(text).toMatch(/^phonebridge_device_closes_total\{code="4001"\} 0$/m);
  // The silence limit's close: PhonebridgeDeviceIdleCloses and the half-open panel read it.
  expect(text).toMatch(/^phonebridge_device_closes_total\{code="1001"\} 0$/m);
  expect(text).toMatch(/^phonebridge_rate_limited_total\{limiter="pair_failures"\} 0$/m);
  expect(text).toMatch(/^phonebridge_http_responses_total\{route="\/mcp",status="200"\} 0$/m);

  await alone.stop();
  relays.pop();
  const clustered = await startTestRelay([
    '--redis-url',
    process.env.PHONEBRIDGE_TEST_REDIS_URL ?? 'redis://127.0.0.1:6379',
    '--redis-prefix',
    `pbm:${randomBytes(4).toString('hex')}:`,
  ]);
  relays.push(clustered);
  const withRedis = await exportedFamilies(clustered);
  expect(documented.filter((f) => !withRedis.families.has(f))).toEqual([]);
  expect(withRedis.text).toMatch(/^phonebridge_redis_up 1$/m);
});
