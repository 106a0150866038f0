// The two-node uWS floor of `npm run loadtest -- relay-overhead` (loadtest/baseline/uws-floor.ts,
// docs/decisions/0231-the-two-node-floor.md): a call to the origin crosses a real Redis to the
// floor that holds the phone and comes back with the client's own id, as a call to the owner
// does without Redis. Figures are not judged here, only that the floor forwards every call.
import { fork, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { z } from 'zod';
import { DeviceAgent, silentLogger } from '../../src/device/agent/index.ts';
import { REDIS_URL } from '../../src/bus/redis/test-support.ts';

const FLOOR = fileURLToPath(new URL('../../loadtest/baseline/uws-floor.ts', import.meta.url));
const channel = `pbt:floor:${randomBytes(4).toString('hex')}:`;
const procs: ChildProcess[] = [];
let agent: DeviceAgent;
let dir: string;
let ownerUrl: string;
let originUrl: string;

function startFloor(args: string[]): Promise<{ proc: ChildProcess; url: string }> {
  const proc = fork(FLOOR, args, { execArgv: ['--import', 'tsx'], stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
  procs.push(proc);
  return new Promise((resolve, reject) => {
    proc.on('message', (m: { type?: string; url?: string }) => m.type === 'ready' && resolve({ proc, url: m.url! }));
    proc.once('exit', (code) => reject(new Error(`uws-floor exited (${code})`)));
  });
}

beforeAll(async () => {
  const code = randomBytes(6).toString('hex');
  const owner = await startFloor(['--code', code, '--redis-url', REDIS_URL, '--channel', `${channel}owner`]);
  ownerUrl = owner.url;
  ({ url: originUrl } = await startFloor([
    ...['--code', randomBytes(6).toString('hex'), '--redis-url', REDIS_URL],
    ...['--channel', `${channel}origin`, '--owner-channel', `${channel}owner`],
  ]));
  dir = mkdtempSync(join(tmpdir(), 'pb-floor-phone-'));
  await DeviceAgent.pair({
    stateDir: dir,
    qr: { v: 1, relay: ownerUrl, code },
    name: 'floor phone',
    log: silentLogger,
  });
  const phoneReady = new Promise<void>((resolve) =>
    owner.proc.on('message', (m: { type?: string }) => m.type === 'phone' && resolve()),
  );
  agent = new DeviceAgent({
    stateDir: dir,
    log: silentLogger,
    createServer: () => {
      const s = new McpServer({ name: 'floor-phone', version: '1.0.0' }, { capabilities: { tools: {} } });
      s.registerTool('echo', { inputSchema: { text: z.string() } }, (a) => ({
        content: [{ type: 'text', text: a.text }],
      }));
      return s;
    },
  });
  agent.start();
  await phoneReady;
}, 30_000);

afterAll(async () => {
  await agent?.stop();
  for (const p of procs) p.kill();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

async function client(url: string): Promise<Client> {
  const c = new Client({ name: 'floor-test', version: '1.0.0' });
  await c.connect(new StreamableHTTPClientTransport(new URL(`${url}/mcp`)));
  return c;
}

it('forwards calls across Redis to the phone and back, each with its own answer', async () => {
  const [viaOrigin, viaOwner] = await Promise.all([client(originUrl), client(ownerUrl)]);
  // In flight together on both nodes: answers matched to their calls, none crossed.
  const texts = Array.from({ length: 40 }, (_, i) => `call ${i}`);
  const answers = await Promise.all(
    texts.map((text, i) => (i % 2 ? viaOwner : viaOrigin).callTool({ name: 'echo', arguments: { text } })),
  );
  expect(answers.map((a) => (a.content as Array<{ text: string }>)[0].text)).toEqual(texts);
  await Promise.all([viaOrigin.close(), viaOwner.close()]);
}, 30_000);
