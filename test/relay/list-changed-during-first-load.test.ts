// docs/PROTOCOL.md "Scopes": the relay fetches tools/list from the phone once per socket, right
// after initialize, and refreshes it on notifications/tools/list_changed; "Refreshes run one at
// a time: notifications arriving during one ask for one more after it, and clients are told
// once, when the catalog is the latest". The first load is one of them: a list_changed while
// its tools/list is unanswered asks for one more after it, so the answer from before the change
// is never the one kept (it was, when a refresh ran beside the first load and the phone answered
// the older request last).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { connectClient, startTestRelay, waitFor, type TestRelay } from '../helpers/relay.ts';
import {
  answerInitialize,
  challenge,
  ECHO_TOOL,
  openSocket,
  pairRaw,
  signedHeaders,
  type RawPhone,
} from '../helpers/raw-device.ts';

let relay: TestRelay;
let phone: RawPhone;
let token: string;

beforeAll(async () => {
  relay = await startTestRelay();
  phone = await pairRaw(relay.url, (await relay.pair()).code);
  token = (await relay.key(phone.deviceId)).token;
});
afterAll(async () => relay?.stop());

const tool = (name: string) => ({ ...ECHO_TOOL, name });

describe('list_changed during the first tools/list', () => {
  it(
    'asks again once the first answer is in, and keeps the catalog after the change',
    { timeout: 20_000 },
    async () => {
      const s = await openSocket(relay.url, signedHeaders(phone, await challenge(relay.url, phone.deviceId)));
      await answerInitialize(s, { tools: { listChanged: true } });
      const first = await s.nextFrame((f) => f.method === 'tools/list');
      // The phone's tools change before it has answered: it says so, then answers the request it
      // was asked with the catalog from before the change.
      s.ws.send(JSON.stringify({ jsonrpc: '2.0', method: 'notifications/tools/list_changed' }));
      // One at a time: no second tools/list while the first is unanswered (one beside it could
      // be answered first, and the older answer then kept).
      const early = await s
        .nextFrame((f) => f.method === 'tools/list' && f.id !== first.id, 300)
        .catch(() => undefined);
      expect(early, 'a second tools/list went out beside the first').toBeUndefined();
      s.ws.send(JSON.stringify({ jsonrpc: '2.0', id: first.id, result: { tools: [tool('echo'), tool('stale')] } }));
      const second = await s.nextFrame((f) => f.method === 'tools/list' && f.id !== first.id, 5000);
      s.ws.send(JSON.stringify({ jsonrpc: '2.0', id: second.id, result: { tools: [tool('echo'), tool('fresh')] } }));
      const hub = relay.relay.node.ctx.hub;
      await waitFor(
        () => hub.device(phone.deviceId)?.surface.tools?.byName.has('fresh') === true,
        5000,
        'the new catalog',
      );
      const { client } = await connectClient(relay.mcpUrl, token);
      expect((await client.listTools()).tools.map((t) => t.name).sort()).toEqual(['echo', 'fresh']);
      await client.close();
      s.ws.close();
      await s.closed;
    },
  );
});
