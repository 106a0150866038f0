// A phone that never answers the relay's initialize. The relay is the phone's MCP client, and
// MCP 2025-11-25 (basic/utilities/cancellation) says "The initialize request MUST NOT be
// cancelled by clients": at the deadline the socket is closed with 1011 (docs/PROTOCOL.md,
// "the phone failed initialize") without a notifications/cancelled for it.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestRelay, type TestRelay } from '../helpers/relay.ts';
import { challenge, openSocket, pairRaw, signedHeaders, type RawPhone } from '../helpers/raw-device.ts';

let relay: TestRelay;
let phone: RawPhone;

beforeAll(async () => {
  relay = await startTestRelay(['--request-timeout-ms', '1000']);
  phone = await pairRaw(relay.url, (await relay.pair()).code);
});
afterAll(async () => relay?.stop());

describe('a phone that never answers initialize', () => {
  it('is closed with 1011 without the relay ever cancelling its initialize', { timeout: 20_000 }, async () => {
    const s = await openSocket(relay.url, signedHeaders(phone, await challenge(relay.url, phone.deviceId)));
    const init = await s.nextFrame((f) => f.method === 'initialize');
    // The phone stays silent. The relay gives up on it: 1011.
    const closed = await Promise.race([s.closed, new Promise<undefined>((r) => setTimeout(r, 8000))]);
    expect(closed?.code).toBe(1011);
    const cancels = s.frames.filter((f) => f.method === 'notifications/cancelled');
    // MCP: the initialize request MUST NOT be cancelled by clients.
    expect(cancels.filter((f) => f.params?.requestId === init.id)).toEqual([]);
  });
});
