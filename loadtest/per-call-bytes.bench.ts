// What the per-call byte work costs
// (docs/decisions/0241-the-request-path-without-runtime-calls.md), each piece beside the
// JSON.parse / JSON.stringify / string hash it stands in for, in one run: the request read from a
// 104-byte `tools/call` body and its frame built, the client's id put back in an answer, the
// in-flight and served keys' hashes, and a cross-node request's bus header written and read. Warm
// (each pair timed in alternating trials after a warm-up), so it shows the work itself, not the
// cold costs of a call at a low rate; relay-overhead and cross-node-ab measure whole calls.
// Run: node --import tsx loadtest/per-call-bytes.bench.ts
import { randomBytes } from 'node:crypto';
import { readClientRequest, requestFrame } from '../src/protocol/request-bytes.ts';
import { inspectPhoneFrame, withId } from '../src/protocol/frame.ts';
import { inFlightHash, inFlightKey, sessionHashOf } from '../src/gateway/fast-post.ts';
import { hashIntWith, hashString } from '../src/gateway/slot-table.ts';
import { decodeNodeMessage, nodeHeaderLine, reqHeaderLine } from '../src/bus/formats.ts';
import type { ReqHeader } from '../src/bus/req-header.ts';
import type { SessionRecord } from '../src/bus/types.ts';

function nsPerOp(fn: (i: number) => unknown, minMs: number): number {
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

const median = (xs: number[]) => [...xs].sort((x, y) => x - y)[xs.length >> 1];

/** A piece and its reference, warmed up, then timed in seven alternating trials: the medians. */
function pair(piece: (i: number) => unknown, reference: (i: number) => unknown): [number, number] {
  for (let i = 0; i < 20_000; i++) {
    piece(i);
    reference(i);
  }
  const a: number[] = [];
  const b: number[] = [];
  for (let trial = 0; trial < 7; trial++) {
    a.push(nsPerOp(piece, 60));
    b.push(nsPerOp(reference, 60));
  }
  return [median(a), median(b)];
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
const originHash = hashString(header.from);
const message = Buffer.from(`${line}{"_meta":{}}`);
// The same header with an escape in its first string: decodeNodeMessage reads it with JSON.parse.
const escaped = Buffer.from(message.toString().replace('"from":"node-7f3a9c2e"', '"from":"node-7f3a9c2\\u0065"'));
if (JSON.stringify(decodeNodeMessage(escaped).header) !== JSON.stringify(decodeNodeMessage(message).header))
  throw new Error('the escaped header reads differently');

const row = (name: string, piece: (i: number) => unknown, ref: string, reference: (i: number) => unknown) => {
  const [ns, refNs] = pair(piece, reference);
  return [name, ns, ref, refNs] as const;
};
const rows = [
  row(
    'request read (readClientRequest)',
    () => readClientRequest(body),
    'JSON.parse',
    () => JSON.parse(body.toString('utf8')),
  ),
  row(
    'frame to the phone (requestFrame)',
    (i) => requestFrame(req, i, caller),
    'JSON.stringify',
    (i) => JSON.stringify({ jsonrpc: '2.0', id: i, method: 'tools/call', params: { name: 'echo' } }),
  ),
  row(
    'client id put back (withId)',
    (i) => withId(answer, at.idStart, at.idEnd, i),
    'JSON.stringify + Buffer.concat',
    (i) => Buffer.concat([answer.subarray(0, at.idStart), Buffer.from(JSON.stringify(i)), answer.subarray(at.idEnd)]),
  ),
  row(
    'in-flight key and hash (inFlightHash)',
    (i) => inFlightKey(session.id, i).length + inFlightHash(sessionHashOf(session), i),
    'hashString of the key',
    (i) => hashString(inFlightKey(session.id, i)),
  ),
  row(
    'served key and hash (hashIntWith)',
    (i) => `node-7f3a9c2e:${i}`.length + hashIntWith(i, originHash),
    'hashString of the key',
    (i) => hashString(`node-7f3a9c2e:${i}`),
  ),
  row(
    'req header written (reqHeaderLine)',
    () => reqHeaderLine(header),
    'JSON.stringify (nodeHeaderLine)',
    () => nodeHeaderLine(header),
  ),
  row(
    'req header read (decodeNodeMessage)',
    () => decodeNodeMessage(message),
    'the same through JSON.parse',
    () => decodeNodeMessage(escaped),
  ),
];
console.log('piece                                   ns/op   stands in for                       ns/op   ratio');
for (const [name, ns, ref, refNs] of rows)
  console.log(
    `${name.padEnd(38)} ${ns.toFixed(0).padStart(6)}   ${ref.padEnd(34)} ${refNs.toFixed(0).padStart(6)}   ${(ns / refNs).toFixed(2)}`,
  );
