// A raw phone (test/helpers/raw-device.ts) whose frames are also kept as the exact
// text the relay sent, on one node or on node `a` of two nodes over Redis (clients then use `b`).
import { startTestRelay, waitFor, type TestRelay } from './relay.ts';
import { startTwoNodes, type TwoNodes } from './two-nodes.ts';
import {
  challenge,
  ECHO_TOOL,
  openSocket,
  pairRaw,
  serveHandshake,
  signedHeaders,
  type OpenSocket,
  type RawPhone,
} from './raw-device.ts';

export interface RawEnv {
  /** The node holding the phone. */
  phoneNode: TestRelay;
  /** The node clients talk to (the same node, or the other one). */
  clientNode: TestRelay;
  phone: RawPhone;
  token: string;
  s: OpenSocket;
  /** Every frame the phone received, as text, byte for byte. */
  rawFrames: string[];
  /** The raw text of the first received frame matching `p` (on its parsed form) after index `from`. */
  nextRaw(p: (f: any) => boolean, from?: number, timeoutMs?: number): Promise<{ raw: string; f: any }>;
  /** Like `nextRaw`, but undefined as soon as `answered` settles with no such frame: the relay answered itself. */
  forwardedUnlessAnswered(
    p: (f: any) => boolean,
    answered: Promise<unknown>,
    from?: number,
  ): Promise<{ raw: string; f: any } | undefined>;
  stop(): Promise<void>;
}

export const TOOLS = [ECHO_TOOL];
export const CAPS = { tools: { listChanged: true }, logging: {}, prompts: {}, resources: {} };

/** The initialize answer a phone sends, as text (a test may give its own). */
export type InitAnswer = (id: number, protocolVersion: string) => string;

export interface PhoneOptions {
  initAnswer?: InitAnswer;
  /** The tools/list answer the phone sends, as text. */
  toolsAnswer?: (id: number) => string;
}

async function attachPhone(
  node: TestRelay,
  extra: () => Promise<void>,
  clientNode = node,
  opts: PhoneOptions = {},
): Promise<RawEnv> {
  const phone = await pairRaw(node.url, (await node.pair()).code);
  const token = (await node.key(phone.deviceId)).token;
  const s = await openSocket(node.url, signedHeaders(phone, await challenge(node.url, phone.deviceId)));
  const rawFrames: string[] = [];
  s.ws.on('message', (d) => void rawFrames.push((d as Buffer).toString('utf8')));
  if (opts.initAnswer || opts.toolsAnswer) {
    const init = await s.nextFrame((f) => f.method === 'initialize');
    s.ws.send(
      opts.initAnswer?.(init.id, init.params.protocolVersion) ??
        JSON.stringify({
          jsonrpc: '2.0',
          id: init.id,
          result: {
            protocolVersion: init.params.protocolVersion,
            capabilities: CAPS,
            serverInfo: { name: 'raw', version: '1' },
          },
        }),
    );
    const list = await s.nextFrame((f) => f.method === 'tools/list');
    s.ws.send(opts.toolsAnswer?.(list.id) ?? JSON.stringify({ jsonrpc: '2.0', id: list.id, result: { tools: TOOLS } }));
  } else await serveHandshake(s, TOOLS, CAPS);
  await waitFor(() => node.relay.node.ctx.hub.device(phone.deviceId)?.isReady === true);
  return {
    phoneNode: node,
    clientNode,
    phone,
    token,
    s,
    rawFrames,
    async nextRaw(p, from = 0, timeoutMs = 5000) {
      const until = Date.now() + timeoutMs;
      const hit = await firstRaw(rawFrames, p, from, () => Date.now() > until);
      if (!hit) throw new Error('no matching frame reached the phone');
      return hit;
    },
    async forwardedUnlessAnswered(p, answered, from = 0) {
      let settled = false;
      const done = () => void (settled = true);
      answered.then(done, done);
      const until = Date.now() + 5000;
      return firstRaw(rawFrames, p, from, () => settled || Date.now() > until);
    },
    async stop() {
      s.ws.close();
      await extra();
    },
  };
}

/** The first frame after `from` matching `p`, polled until `stop()` says there will be none. */
async function firstRaw(
  rawFrames: string[],
  p: (f: any) => boolean,
  from: number,
  stop: () => boolean,
): Promise<{ raw: string; f: any } | undefined> {
  for (;;) {
    const stopping = stop();
    for (let i = from; i < rawFrames.length; i++) {
      const f = JSON.parse(rawFrames[i]);
      if (p(f)) return { raw: rawFrames[i], f };
    }
    if (stopping) return undefined;
    await new Promise((r) => setTimeout(r, 10));
  }
}

export async function oneNode(args: string[] = [], opts: PhoneOptions = {}): Promise<RawEnv> {
  const relay = await startTestRelay(args);
  return attachPhone(relay, () => relay.stop(), relay, opts);
}

export async function twoNodes(args: string[] = [], opts: PhoneOptions = {}): Promise<RawEnv & { t: TwoNodes }> {
  const t = await startTwoNodes(args);
  const env = await attachPhone(t.a, () => t.stop(), t.b, opts);
  return { ...env, t };
}

/** The text of `key`'s value in a JSON text, found by a byte scan of the first occurrence of `"key":`. */
export function rawMember(text: string, key: string): string | undefined {
  const at = text.indexOf(`"${key}":`);
  if (at < 0) return undefined;
  let i = at + key.length + 3;
  const start = i;
  let depth = 0;
  let inStr = false;
  for (; i < text.length; i++) {
    const c = text[i];
    if (inStr) {
      if (c === '\\') i++;
      else if (c === '"') inStr = false;
      continue;
    }
    if (c === '"') inStr = true;
    else if (c === '{' || c === '[') depth++;
    else if (c === '}' || c === ']') {
      if (depth === 0) return text.slice(start, i);
      depth--;
    } else if (c === ',' && depth === 0) return text.slice(start, i);
  }
  return text.slice(start);
}
