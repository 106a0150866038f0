// docs/PROTOCOL.md "Scopes": tools/list is answered from the relay's cache of the phone's
// catalog, filtered to the credential's scopes. Filtering removes tools; it must not change the
// tools it keeps: a uint64 bound in a tool's inputSchema is the phone's contract with the client.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { oneNode, twoNodes, type RawEnv } from '../helpers/frame-text-phone.ts';
import { openSession, post } from '../helpers/raw-mcp.ts';

const UINT64_MAX = '18446744073709551615';
const toolsAnswer = (id: number) =>
  `{"jsonrpc":"2.0","id":${id},"result":{"tools":[{"name":"echo","inputSchema":{"type":"object","properties":{"n":{"type":"integer","minimum":0,"maximum":${UINT64_MAX}}}},"_meta":{"phonebridge/scope":"devices:act"}}]}}`;

for (const topology of ['one node', 'two nodes (client on the node without the phone)'] as const) {
  describe(`tools/list from the cache, ${topology}`, () => {
    let env: RawEnv;
    beforeAll(async () => {
      env = topology === 'one node' ? await oneNode([], { toolsAnswer }) : await twoNodes([], { toolsAnswer });
    });
    afterAll(() => env?.stop());

    it("a kept tool's inputSchema reaches the client as the phone sent it (uint64 maximum not rounded)", async () => {
      const h = await openSession(env.clientNode.mcpUrl, env.token);
      const r = await post(
        env.clientNode.mcpUrl,
        { ...h, accept: 'application/json' },
        '{"jsonrpc":"2.0","id":1,"method":"tools/list"}',
      );
      expect(r.status).toBe(200);
      expect(r.text, `inputSchema.properties.n.maximum must be ${UINT64_MAX}`).toContain(`"maximum":${UINT64_MAX}`);
    });
  });
}
