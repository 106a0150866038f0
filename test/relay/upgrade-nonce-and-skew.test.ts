// The upgrade's nonce and clock-skew rules (docs/PROTOCOL.md "Device connection", 2.): the nonce
// is taken before anything else is checked, so a try refused for its skew (or a missing header)
// burns it and its captured headers cannot be sent again once the ts is in range; and the skew
// is compared in whole seconds, as the phone sends its ts, so a phone under 60 s off is served.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestRelay, type TestRelay } from '../helpers/relay.ts';
import {
  challenge,
  completeHandshake,
  openSocket,
  pairRaw,
  signedHeaders,
  type RawPhone,
} from '../helpers/raw-device.ts';

let relay: TestRelay;
let phone: RawPhone;

beforeAll(async () => {
  relay = await startTestRelay();
  phone = await pairRaw(relay.url, (await relay.pair()).code);
});
afterAll(async () => relay?.stop());

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('a nonce used in a refused upgrade', () => {
  // "The nonce is consumed before the signature is checked: a failed try burns it. ... a clock
  // skew over sixty seconds, an unknown/expired/reused nonce ...: closed at once with 4003".
  // The skew is checked before the nonce is taken, so a try refused for its skew leaves the
  // nonce live: the same captured headers replayed a few seconds later (once the signed ts is
  // within 60 s of the relay's clock) are accepted.
  it('is burnt by a try refused for clock skew: replaying it is refused', { timeout: 20_000 }, async () => {
    const nonce = await challenge(relay.url, phone.deviceId);
    // Signed with a ts 62 s ahead: refused now for its skew.
    const ahead = Math.floor(Date.now() / 1000) + 62;
    const headers = signedHeaders(phone, nonce, { ts: ahead });
    const first = await openSocket(relay.url, headers);
    const c1 = await first.closed;
    expect(c1.code).toBe(4003);
    expect(c1.reason).toMatch(/skew/);
    // The very same headers (a replay), once the relay's clock has moved within 60 s of that ts.
    while (Date.now() / 1000 < ahead - 59.5) await sleep(100);
    const replay = await openSocket(relay.url, headers);
    const frames: unknown[] = replay.frames;
    const c2 = await Promise.race([replay.closed, sleep(1500).then(() => undefined)]);
    if (c2 === undefined) {
      // It was attached: the relay sent initialize to the replayed socket.
      replay.ws.close();
      await replay.closed;
    }
    expect(frames).toEqual([]);
    expect(c2?.code).toBe(4003);
  });
});

describe('clock skew', () => {
  // "A clock skew over sixty seconds ... closed at once with 4003 ... (`clock skew over 60 s`)".
  // X-Device-Ts is whole Unix seconds (the phone's clock, floored): a phone 59.5 s behind,
  // under the limit, sends ts = floor(now − 59.5), which a relay comparing it with its own clock
  // in milliseconds read as over 60 s old and refused.
  it('accepts a phone whose clock is 59.5 s behind (under 60 s)', { timeout: 20_000 }, async () => {
    // Deterministic: act early in a second of the relay's clock, so that
    // floor(now − 59.5) = floor(now) − 60, and the relay checks within the same second (850 ms
    // of margin for the upgrade to arrive).
    const nonce = await challenge(relay.url, phone.deviceId);
    while (Date.now() % 1000 > 150 || Date.now() % 1000 < 20) await sleep(5);
    const phoneClockMs = Date.now() - 59_500;
    const ts = Math.floor(phoneClockMs / 1000);
    const s = await openSocket(relay.url, signedHeaders(phone, nonce, { ts }));
    const closedEarly = await Promise.race([s.closed, sleep(800).then(() => undefined)]);
    expect(closedEarly).toBeUndefined();
    await completeHandshake(s);
    s.ws.close();
    await s.closed;
  });
});
