// A relay listening on "::" takes IPv4 clients too, and uWS reports them in the full hex
// IPv4-mapped form ("0000:0000:0000:0000:0000:ffff:7f00:0001"). Rate limits count them by
// their IPv4 address (normaliseAddress in src/gateway/client-address.ts;
// docs/decisions/0031-client-addresses.md), not by the one IPv6 /64 that every mapped address
// falls in: one address's wrong pairing codes do not lock every other IPv4 phone out of /pair.
// Same test on an IPv4-only listener as the control.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { request } from 'node:http';
import { createServer } from 'node:net';
import { startTestRelay, type TestRelay } from '../helpers/relay.ts';
import { generateDeviceKey } from '../../src/crypto/device-auth.ts';
import { PAIR_FAILURE_LIMIT } from '../../src/gateway/pairing.ts';

const WRONG = 'AAAA-AAAA-AAAA-AAAA-AAAA-AAAA-AAAA-AAAA';
const publicKey = generateDeviceKey().publicKeySpkiBase64;

function freePort(): Promise<number> {
  return new Promise((resolve) => {
    const s = createServer().listen(0, '127.0.0.1', () => {
      const p = (s.address() as { port: number }).port;
      s.close(() => resolve(p));
    });
  });
}

/** POST /pair from a chosen loopback source address. */
function pairFrom(port: number, localAddress: string, code: string): Promise<number> {
  const body = JSON.stringify({ code, public_key: publicKey, name: 'x' });
  return new Promise((resolve, reject) => {
    const req = request(
      {
        host: '127.0.0.1',
        port,
        path: '/pair',
        method: 'POST',
        localAddress,
        headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) },
      },
      (res) => {
        res.resume();
        res.on('end', () => resolve(res.statusCode!));
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

describe.each(['::', '0.0.0.0'])('listening on %s', (host) => {
  let relay: TestRelay;
  let port: number;
  beforeAll(async () => {
    port = await freePort();
    relay = await startTestRelay(['--host', host, '--port', String(port), '--public-url', `http://127.0.0.1:${port}`]);
  });
  afterAll(async () => {
    await relay?.stop();
  });

  it("wrong codes from one IPv4 address reach the limit for it alone: another address's good code pairs", async () => {
    const statuses: number[] = [];
    for (let i = 0; i <= PAIR_FAILURE_LIMIT; i++) statuses.push(await pairFrom(port, '127.0.0.2', WRONG));
    expect(statuses).toEqual([...Array(PAIR_FAILURE_LIMIT).fill(403), 429]);
    const qr = await relay.pair();
    expect(await pairFrom(port, '127.0.0.3', qr.code)).toBe(200);
  });
});
