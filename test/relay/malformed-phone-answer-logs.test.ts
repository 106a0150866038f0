// A phone's answer to the relay's own requests (initialize, tools/list) whose braces close but
// whose inside is not JSON passes the frame check (src/protocol/frame.ts) and fails the parse in
// src/gateway/phone-surface.ts. JSON.parse's error quotes the text around the fault; the
// relay logs the failure with its own message instead, so none of the phone's content reaches
// the log (docs/PROTOCOL.md: a malformed answer is logged without its content), at debug level
// too.
import { afterAll, beforeAll, expect, it } from 'vitest';
import { createLogger } from '../../src/log.ts';
import { startTestRelay, waitFor, type TestRelay } from '../helpers/relay.ts';
import { answerInitialize, challenge, openSocket, pairRaw, signedHeaders } from '../helpers/raw-device.ts';

const lines: string[] = [];
let relay: TestRelay;
beforeAll(async () => {
  relay = await startTestRelay([], {
    log: createLogger({ level: 'debug', destination: { write: (l) => void lines.push(l) } }),
  });
});
afterAll(async () => {
  await relay?.stop();
});

it('a malformed initialize answer is refused without its content reaching the log', async () => {
  const phone = await pairRaw(relay.url, (await relay.pair()).code);
  const s = await openSocket(relay.url, signedHeaders(phone, await challenge(relay.url, phone.deviceId)));
  const init = await s.nextFrame((f) => f.method === 'initialize');
  const marker = 'Pc4e1d9aQ'; // phone content: the instructions the server gives
  // One whole JSON object as far as braces and strings go; not JSON inside.
  s.ws.send(
    `{"jsonrpc":"2.0","id":${init.id},"result":{"protocolVersion":"2025-11-25","capabilities":{},` +
      `"serverInfo":{"name":"raw","version":"1"},"instructions":${marker}}}`,
  );
  const closed = await s.closed;
  expect(closed.code).toBe(1011);
  await waitFor(
    () => lines.some((l) => l.includes('phone answered initialize with invalid JSON') && l.includes(phone.deviceId)),
    5000,
    'the failure logged, named',
  );
  const bad = lines.filter((l) => l.includes(marker));
  for (const l of bad) console.log('LOG LINE:', l.trim());
  expect(bad).toEqual([]);
});

it('a malformed tools/list answer is refused without its content reaching the log', async () => {
  const phone = await pairRaw(relay.url, (await relay.pair()).code);
  const s = await openSocket(relay.url, signedHeaders(phone, await challenge(relay.url, phone.deviceId)));
  await answerInitialize(s);
  const list = await s.nextFrame((f) => f.method === 'tools/list');
  const marker = 'Td77b3c0Q'; // a tool description
  s.ws.send(`{"jsonrpc":"2.0","id":${list.id},"result":{"tools":[{"name":"echo","description":${marker}}]}}`);
  const failed = () => lines.filter((l) => l.includes('invalid JSON') && l.includes(phone.deviceId));
  expect((await s.closed).code).toBe(1011);
  await waitFor(() => failed().length > 0, 5000, 'the failure logged, named');
  expect(failed()[0]).toContain('phone answered tools/list with invalid JSON');
  const bad = lines.filter((l) => l.includes(marker));
  for (const l of bad) console.log('LOG LINE:', l.trim());
  expect(bad).toEqual([]);
});

it('a tools/list answer cut inside, with its id last, fails the handshake as its parse does', async () => {
  // Answers to the relay's own requests skip the one-pass whole-object check (their parse, or
  // the intern table's byte comparison with an answer parsed before, stands for it:
  // ReplySink.checksWhole): a frame that only looks whole at its ends must still be refused.
  const phone = await pairRaw(relay.url, (await relay.pair()).code);
  const s = await openSocket(relay.url, signedHeaders(phone, await challenge(relay.url, phone.deviceId)));
  await answerInitialize(s);
  const list = await s.nextFrame((f) => f.method === 'tools/list');
  const marker = 'Cq51a0e7Q';
  // The description's string swallows `,"`; what follows is no JSON, but the frame starts with
  // "result" and ends with `,"id":N}` as an SDK's answer does.
  s.ws.send(`{"result":{"tools":[{"name":"echo","description":"${marker}` + `,"id":${list.id}}`);
  expect((await s.closed).code).toBe(1011);
  await waitFor(
    () => lines.some((l) => l.includes('phone answered tools/list with invalid JSON') && l.includes(phone.deviceId)),
    5000,
    'the failure logged, named',
  );
  expect(lines.filter((l) => l.includes(marker))).toEqual([]);
  expect(relay.relay.node.ctx.hub.device(phone.deviceId)).toBeUndefined();
});
