// docs/PROTOCOL.md rewrite 1: a client's initialize "is answered by the relay from the cached
// result (only `protocolVersion` is set)". The phone's initialize result must otherwise reach the
// client as the phone sent it.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { oneNode, twoNodes, type RawEnv } from '../helpers/frame-text-phone.ts';
import { baseHeaders } from '../helpers/raw-mcp.ts';

const BIG = '12345678901234567890';
const initAnswer = (id: number, pv: string) =>
  `{"jsonrpc":"2.0","id":${id},"result":{"protocolVersion":"${pv}","capabilities":{"tools":{"listChanged":true},"logging":{},"experimental":{"phone":{"serial":${BIG}}}},"serverInfo":{"name":"raw","version":"1"}}}`;

for (const topology of ['one node', 'two nodes (client on the node without the phone)'] as const) {
  describe(`initialize from the cache, ${topology}`, () => {
    let env: RawEnv;
    beforeAll(async () => {
      env = topology === 'one node' ? await oneNode([], { initAnswer }) : await twoNodes([], { initAnswer });
    });
    afterAll(() => env?.stop());

    it("the phone's initialize result reaches the client unchanged but for protocolVersion", async () => {
      const r = await fetch(env.clientNode.mcpUrl, {
        method: 'POST',
        headers: { ...baseHeaders(env.token), accept: 'application/json' },
        body: JSON.stringify({
          jsonrpc: '2.0',
          id: 0,
          method: 'initialize',
          params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 't', version: '1' } },
        }),
      });
      const text = await r.text();
      expect(r.status).toBe(200);
      expect(text, `capabilities.experimental.phone.serial must be ${BIG} as the phone sent it`).toContain(
        `"serial":${BIG}`,
      );
    });
  });
}
