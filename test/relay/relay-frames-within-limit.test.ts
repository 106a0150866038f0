// docs/PROTOCOL.md "Framing": one JSON-RPC message per text frame, at most 256 KiB, and "the
// limit holds for the frame the phone receives". Frames the relay writes itself hold to it too:
// a client notification gets the caller context (rewrite 4), so a body within that margin of
// 256 KiB would leave as a frame over it, and the reference phone (maxPayload 256 KiB) would
// drop its socket with every call in flight. Such a POST is refused with 413 `too_large` and
// nothing in it reaches the phone. The relay's -32601 to a phone's own request quotes its
// method only in part, so a request near the limit still gets an answer within it.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { rawPhoneRelay, type RawPhoneRelay } from '../helpers/raw-phone-relay.ts';
import { openSession, post } from '../helpers/raw-mcp.ts';

const LIMIT = 256 * 1024;

/** A client notification whose JSON body is exactly `bytes` long. */
function notificationOfSize(bytes: number): string {
  const base = { jsonrpc: '2.0', method: 'notifications/test/pad', params: { pad: '' } };
  const pad = bytes - Buffer.byteLength(JSON.stringify(base));
  return JSON.stringify({ ...base, params: { pad: 'x'.repeat(pad) } });
}

let env: RawPhoneRelay;
const sizes: number[] = [];
beforeAll(async () => {
  env = await rawPhoneRelay();
  env.s.ws.on('message', (data: Buffer) => void sizes.push(data.length));
});
afterAll(() => env?.stop());

describe('frames the relay writes to the phone near 256 KiB', () => {
  it('a notification whose frame would pass the limit is refused with 413 too_large; one that fits is forwarded', async () => {
    const h = await openSession(env.relay.mcpUrl, env.token);
    const from = sizes.length;
    const refused = await post(env.relay.mcpUrl, h, notificationOfSize(LIMIT - 16));
    expect({ status: refused.status, code: refused.json?.error?.code, data: refused.json?.error?.data }).toEqual({
      status: 413,
      code: -31003,
      data: { code: 'too_large' },
    });
    expect(refused.json?.error?.message).toMatch(/would be \d+ bytes \(caller context included\), over 262144/);
    // A batch (2025-03-26) with one such notification is refused whole: its request never leaves.
    const h0326 = await openSession(env.relay.mcpUrl, env.token, '2025-03-26');
    const batch = await post(
      env.relay.mcpUrl,
      h0326,
      `[{"jsonrpc":"2.0","id":7,"method":"tools/list"},${notificationOfSize(LIMIT - 60)}]`,
    );
    expect(batch.status).toBe(413);

    const fits = await post(env.relay.mcpUrl, h, notificationOfSize(LIMIT - 2000));
    expect(fits.status).toBe(202);
    const note = await env.s.nextFrame((f) => f.method === 'notifications/test/pad', 5000);
    expect(note.params._meta['phonebridge/caller']).toBeDefined();
    // Only the one that fits reached the phone, and nothing over the limit did.
    expect(sizes.slice(from).filter((n) => n > 1000)).toHaveLength(1);
    expect(Math.max(...sizes)).toBeLessThanOrEqual(LIMIT);
    expect(env.s.ws.readyState).toBe(env.s.ws.OPEN);
  });

  it("the relay's -32601 to a phone request near 256 KiB stays within 256 KiB", async () => {
    const from = sizes.length;
    const base = { jsonrpc: '2.0', id: 'big', method: '' };
    const method = 'x/' + 'm'.repeat(LIMIT - 10 - Buffer.byteLength(JSON.stringify(base)) - 2);
    const frame = JSON.stringify({ ...base, method });
    expect(Buffer.byteLength(frame)).toBe(LIMIT - 10);
    env.s.ws.send(frame);
    const answer = await env.s.nextFrame((f) => f.id === 'big', 5000);
    expect(answer.error.code).toBe(-32601);
    expect(answer.error.message).toMatch(/^Method not found: the relay does not forward x\/m+… to clients$/);
    expect(Math.max(...sizes.slice(from))).toBeLessThanOrEqual(LIMIT);
  });
});
