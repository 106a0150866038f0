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

const WRONG = 'AAAA-AAAA-AAAA-AAAA-AAAA-AAAA-AAAA-AAAA';
const publicKey = generateDeviceKey().publicKeySpkiBase64;

async function burst(urls: string[], n: number): Promise<{ forbidden: number; limited: number; other: number[] }> {
  const statuses = await Promise.all(
    Array.from({ length: n }, (_, i) =>
      postJson(`${urls[i % urls.length]}/pair`, { code: WRONG, public_key: publicKey, name: 'x' }).then(
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
