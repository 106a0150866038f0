// The pairing failure limit holds when the attempts arrive at once: 40 concurrent wrong codes
// from one address get at most PAIR_FAILURE_LIMIT answers of 403 and 429 for the rest — on one
// node, and spread over two nodes sharing the counter in Redis. Attempts that are not wrong
// codes do not use up the allowance.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { postJson } from '../helpers/raw-device.ts';
import { startTestRelay, type TestRelay } from '../helpers/relay.ts';
import { startTwoNodes, type TwoNodes } from '../helpers/two-nodes.ts';
import { generateDeviceKey } from '../../src/crypto/device-auth.ts';
import { PAIR_FAILURE_LIMIT } from '../../src/gateway/pairing.ts';
import { REDIS_URL } from '../../src/bus/redis/test-support.ts';
import { Redis } from 'ioredis';

const WRONG = 'AAAA-AAAA-AAAA-AAAA-AAAA-AAAA-AAAA-AAAA';
const publicKey = generateDeviceKey().publicKeySpkiBase64;

async function burst(
  urls: string[],
  n: number,
  headers: Record<string, string> = {},
): Promise<{ forbidden: number; limited: number; other: number[] }> {
  const statuses = await Promise.all(
    Array.from({ length: n }, (_, i) =>
      postJson(`${urls[i % urls.length]}/pair`, { code: WRONG, public_key: publicKey, name: 'x' }, headers).then(
        (r) => r.status,
      ),
    ),
  );
  return {
    forbidden: statuses.filter((s) => s === 403).length,
    limited: statuses.filter((s) => s === 429).length,
    other: statuses.filter((s) => s !== 403 && s !== 429),
  };
}

describe('one node', () => {
  let relay: TestRelay;
  beforeAll(async () => {
    relay = await startTestRelay();
  });
  afterAll(async () => {
    await relay?.stop();
  });

  it('malformed attempts and good pairings do not count; 40 concurrent wrong codes: 5 × 403, 35 × 429', async () => {
    for (let i = 0; i < PAIR_FAILURE_LIMIT + 2; i++)
      expect((await postJson(`${relay.url}/pair`, 'not json')).status).toBe(400);
    for (let i = 0; i < PAIR_FAILURE_LIMIT + 1; i++) {
      const qr = await relay.pair();
      const r = await postJson(`${relay.url}/pair`, {
        code: qr.code,
        public_key: generateDeviceKey().publicKeySpkiBase64,
        name: 'ok',
      });
      expect(r.status).toBe(200);
    }
    const r = await burst([relay.url], 40);
    expect(r).toEqual({ forbidden: PAIR_FAILURE_LIMIT, limited: 40 - PAIR_FAILURE_LIMIT, other: [] });
  });
});

describe('two nodes over Redis', () => {
  let nodes: TwoNodes;
  beforeAll(async () => {
    nodes = await startTwoNodes();
  });
  afterAll(async () => {
    await nodes?.stop();
  });

  it('40 concurrent wrong codes spread over both nodes: 5 × 403 in all', async () => {
    const r = await burst([nodes.a.url, nodes.b.url], 40);
    expect(r).toEqual({ forbidden: PAIR_FAILURE_LIMIT, limited: 40 - PAIR_FAILURE_LIMIT, other: [] });
  });
});

describe('two nodes, the windows of the gate and of the confirmed failures', () => {
  let lapse: TwoNodes;
  const XFF = { 'x-forwarded-for': '10.77.0.1' };
  beforeAll(async () => {
    lapse = await startTwoNodes(['--trust-proxy']);
  });
  afterAll(async () => {
    await lapse?.stop();
  });

  it("five confirmed wrong codes keep refusing when the gate counter's older window lapses first", async () => {
    // The gate's counter opens its window at an address's first attempt, here a good pairing;
    // the confirmed failures open theirs at the first wrong code, later. When the first lapses,
    // the five wrong codes of the last ten minutes still stand.
    const redis = new Redis(REDIS_URL);
    try {
      const good = await lapse.a.pair();
      const ok = await postJson(`${lapse.a.url}/pair`, { code: good.code, public_key: publicKey, name: 'ok' }, XFF);
      expect(ok.status).toBe(200);
      for (let i = 0; i < PAIR_FAILURE_LIMIT; i++) expect((await burst([lapse.b.url], 1, XFF)).forbidden).toBe(1);
      // What Redis does when the gate counter's window ends (the good pairing's ten minutes).
      const gate = await redis.keys(`${lapse.prefix}rl:pairfail:10.77.0.1`);
      expect(gate).toHaveLength(1);
      await redis.del(gate[0]);
      const after = await burst([lapse.a.url, lapse.b.url], 4, XFF);
      expect(after).toEqual({ forbidden: 0, limited: 4, other: [] });
    } finally {
      redis.disconnect();
    }
  });
});
