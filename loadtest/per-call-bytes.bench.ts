// What the per-call byte work costs (docs/decisions/0241-the-request-path-without-runtime-calls.md),
// each piece beside the JSON.parse / JSON.stringify / string hash it stands in for, in one run:
// the request read from a 104-byte `tools/call` body and its frame built, the client's id put
// back in an answer, the in-flight key's hash, and a cross-node request's bus header written
// and read. Warm (each timed after a warm-up), so it shows the work itself, not the cold
// costs of a call at a low rate; relay-overhead and cross-node-ab measure whole calls.
// Run: node --import tsx loadtest/per-call-bytes.bench.ts
import { randomBytes } from 'node:crypto';
import { readClientRequest, requestFrame } from '../src/protocol/request-bytes.ts';
import { inspectPhoneFrame, withId } from '../src/protocol/frame.ts';
import { inFlightHash, inFlightKey, sessionHashOf } from '../src/gateway/fast-post.ts';
import { hashString } from '../src/gateway/slot-table.ts';
import { decodeNodeMessage, nodeHeaderLine, reqHeaderLine } from '../src/bus/formats.ts';
import type { ReqHeader } from '../src/bus/req-header.ts';
import type { SessionRecord } from '../src/bus/types.ts';

function nsPerOp(fn: (i: number) => unknown, minMs = 300): number {
  for (let i = 0; i < 20_000; i++) fn(i);
  let n = 0;
  let sink = 0;
  const start = performance.now();
  while (performance.now() - start < minMs) {
    for (let i = 0; i < 1000; i++) sink ^= fn(n + i) === undefined ? 0 : 1;
    n += 1000;
  }
  if (sink === 2) console.log(''); // keeps the results alive
  return ((performance.now() - start) * 1e6) / n;
}

const body = Buffer.from(
  JSON.stringify({
    jsonrpc: '2.0',
    id: 12345,
    method: 'tools/call',
    params: { name: 'echo', arguments: { text: 'hello' } },
  }),
);
const caller = Buffer.from(
  JSON.stringify({ credential: 'key_0123456789abcdef', scopes: ['devices:read', 'devices:act'] }),
);
const req = readClientRequest(body)!;
const answer = Buffer.from('{"result":{"content":[{"type":"text","text":"hello"}]},"jsonrpc":"2.0","id":918273}');
const at = inspectPhoneFrame(answer) as { idStart: number; idEnd: number };
const session = { id: randomBytes(32).toString('base64url') } as SessionRecord;
const header: ReqHeader = {
  t: 'req',
  from: 'node-7f3a9c2e',
  rid: 123456,
  deviceId: 'dev_8b1c2d3e4f5a6b7c8d9e0f1a',
  epoch: 17,
  id: 4242,
  method: 'tools/call',
  scopes: ['devices:read', 'devices:act'],
  tokenId: 'key_0123456789abcdef0123',
  timeoutMs: 30_000,
  b: 1,
  tn: 'echo',
};
const line = nodeHeaderLine(header);
const message = Buffer.from(`${line}{"_meta":{}}`);

const rows: Array<[string, number, string, number]> = [
  [
    'request read (readClientRequest)',
    nsPerOp(() => readClientRequest(body)),
    'JSON.parse',
    nsPerOp(() => JSON.parse(body.toString('utf8'))),
  ],
  [
    'frame to the phone (requestFrame)',
    nsPerOp((i) => requestFrame(req, i, caller)),
    'JSON.stringify',
    nsPerOp((i) => JSON.stringify({ jsonrpc: '2.0', id: i, method: 'tools/call', params: { name: 'echo' } })),
  ],
  [
    'client id put back (withId)',
    nsPerOp((i) => withId(answer, at.idStart, at.idEnd, i)),
    'JSON.stringify + Buffer.concat',
    nsPerOp((i) =>
      Buffer.concat([answer.subarray(0, at.idStart), Buffer.from(JSON.stringify(i)), answer.subarray(at.idEnd)]),
    ),
  ],
  [
    'in-flight key and hash (inFlightHash)',
    nsPerOp((i) => inFlightKey(session.id, i).length + inFlightHash(sessionHashOf(session), i)),
    'hashString of the key',
    nsPerOp((i) => hashString(inFlightKey(session.id, i))),
  ],
  [
    'req header written (reqHeaderLine)',
    nsPerOp(() => reqHeaderLine(header)),
    'JSON.stringify (nodeHeaderLine)',
    nsPerOp(() => nodeHeaderLine(header)),
  ],
  [
    'req header read (decodeNodeMessage)',
    nsPerOp(() => decodeNodeMessage(message)),
    'JSON.parse of the header',
    nsPerOp(() => JSON.parse(message.toString('utf8', 0, line.length - 1))),
  ],
];
console.log('piece                                   ns/op   stands in for                       ns/op   ratio');
for (const [name, ns, ref, refNs] of rows)
  console.log(
    `${name.padEnd(38)} ${ns.toFixed(0).padStart(6)}   ${ref.padEnd(34)} ${refNs.toFixed(0).padStart(6)}   ${(ns / refNs).toFixed(2)}`,
  );
