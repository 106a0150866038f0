// Behind a proxy (--trust-proxy), rate limits count the address the proxy saw, not what the
// client wrote into X-Forwarded-For: rotating forged entries does not get past the pairing
// limit, a forged victim address does not lock the victim out, and an IPv6 /64 is one client.
// On one node and across two sharing the counters in Redis.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { postJson } from '../helpers/raw-device.ts';
import { startTestRelay, type TestRelay } from '../helpers/relay.ts';
import { startTwoNodes, type TwoNodes } from '../helpers/two-nodes.ts';
import { generateDeviceKey } from '../../src/crypto/device-auth.ts';
import { PAIR_FAILURE_LIMIT } from '../../src/gateway/pairing.ts';

const WRONG = 'AAAA-AAAA-AAAA-AAAA-AAAA-AAAA-AAAA-AAAA';
const publicKey = generateDeviceKey().publicKeySpkiBase64;

/** A wrong code as the ingress forwards it: the client's own X-Forwarded-For, then what the ingress saw. */
function wrongCode(url: string, forwardedFor: string): Promise<number> {
  return postJson(
    `${url}/pair`,
    { code: WRONG, public_key: publicKey, name: 'x' },
    { 'x-forwarded-for': forwardedFor },
  ).then((r) => r.status);
}

function suite(name: string, start: () => Promise<{ urls: string[]; stop(): Promise<void> }>) {
  describe(name, () => {
    let env: { urls: string[]; stop(): Promise<void> };
    const url = (i: number) => env.urls[i % env.urls.length];
    beforeAll(async () => {
      env = await start();
    });
    afterAll(async () => {
      await env?.stop();
    });

    it('forged left-most entries do not reset the pairing limit', async () => {
      const statuses: number[] = [];
      for (let i = 1; i <= PAIR_FAILURE_LIMIT + 3; i++)
        statuses.push(await wrongCode(url(i), `9.9.9.${i}, 203.0.113.7`));
      expect(statuses).toEqual([...Array(PAIR_FAILURE_LIMIT).fill(403), 429, 429, 429]);
    });

    it("a victim's address written by the attacker does not lock the victim out", async () => {
      for (let i = 1; i <= PAIR_FAILURE_LIMIT + 1; i++) await wrongCode(url(i), '203.0.113.50, 203.0.113.66');
      expect(await wrongCode(url(0), '203.0.113.66')).toBe(429); // the attacker is limited
      expect(await wrongCode(url(1), '203.0.113.50')).toBe(403); // the victim is not
    });

    it('counts an IPv6 /64 as one client, and the next /64 apart', async () => {
      const statuses: number[] = [];
      for (let i = 1; i <= PAIR_FAILURE_LIMIT + 1; i++)
        statuses.push(await wrongCode(url(i), `2001:db8:7:1::${i.toString(16)}`));
      expect(statuses).toEqual([...Array(PAIR_FAILURE_LIMIT).fill(403), 429]);
      expect(await wrongCode(url(0), '2001:db8:7:2::1')).toBe(403);
    });
  });
}

suite('one node', async () => {
  const relay: TestRelay = await startTestRelay(['--trust-proxy']);
  return { urls: [relay.url], stop: () => relay.stop() };
});

suite('two nodes over Redis', async () => {
  const nodes: TwoNodes = await startTwoNodes(['--trust-proxy']);
  return { urls: [nodes.a.url, nodes.b.url], stop: () => nodes.stop() };
});

describe('--trusted-proxies', () => {
  let relay: TestRelay;
  beforeAll(async () => {
    relay = await startTestRelay(['--trust-proxy', '--trusted-proxies', '127.0.0.0/8,10.0.0.0/8']);
  });
  afterAll(async () => {
    await relay?.stop();
  });

  it('walks left past every trusted proxy to the first address that is not one', async () => {
    const statuses: number[] = [];
    for (let i = 1; i <= PAIR_FAILURE_LIMIT + 1; i++)
      statuses.push(await wrongCode(relay.url, `9.9.9.${i}, 203.0.113.8, 10.0.0.1, 10.0.0.2`));
    expect(statuses).toEqual([...Array(PAIR_FAILURE_LIMIT).fill(403), 429]);
  });
});
