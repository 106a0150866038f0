// Every answer leaves the relay in one syscall, wherever it is produced (docs/decisions/0050-one-write-per-answer.md): uWS
// 20.30 corks one socket at a time, so an answer written inside the phone socket's handler,
// from a bus message or from a timer would otherwise go out as a syscall per status line,
// header and body. Counted for real: strace attached to a relay child while the calls run.
import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startRelayChild, type RelayChild } from '../../loadtest/fleet-relay.ts';
import { DeviceAgent, silentLogger } from '../../src/device/agent/index.ts';
import { createEchoServer } from '../fixtures/echo-server.ts';
import { startTestCluster, type TestCluster } from '../cluster/harness.ts';

const SESSION_REVISION = '2025-11-25';
const STATELESS_REVISION = '2026-07-28';
const CALLS = 12;

const strace = spawnSync('strace', ['-V']);
if (strace.status !== 0)
  throw new Error('test/relay/one-write.test.ts counts syscalls with strace: apt-get install -y strace');

const dir = mkdtempSync(join(tmpdir(), 'pb-onewrite-'));
let traces = 0;

interface Send {
  fd: number;
  /** The first bytes, as strace prints them (C escapes). */
  head: string;
  /** The length passed to the call. */
  bytes: number;
}

/** Every send-type syscall of `pid` (all threads) while `work` runs. */
async function traceSends(pid: number, work: () => Promise<void>): Promise<Send[]> {
  const file = join(dir, `trace-${traces++}`);
  const st = spawn(
    'strace',
    ['-f', '-e', 'trace=sendto,sendmsg,write,writev', '-e', 'signal=none', '-s', '24', '-o', file, '-p', String(pid)],
    { stdio: ['ignore', 'ignore', 'pipe'] },
  );
  let stderr = '';
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`strace did not attach: ${stderr}`)), 10_000);
    st.stderr.on('data', (d) => {
      stderr += String(d);
      if (stderr.includes(`Process ${pid} attached`)) {
        clearTimeout(timer);
        resolve();
      }
    });
    st.once('exit', (code) => reject(new Error(`strace exited (${code}): ${stderr}`)));
  });
  try {
    await work();
  } finally {
    const exited = new Promise((r) => st.once('exit', r));
    st.kill('SIGINT');
    await exited;
  }
  const sends: Send[] = [];
  for (const line of readFileSync(file, 'utf8').split('\n')) {
    // Also the "<unfinished ...>" halves of calls that interleaved with another thread's.
    const m =
      /^\d+\s+(?:sendto|sendmsg|write|writev)\((\d+), (?:\[\{iov_base=)?"((?:[^"\\]|\\.)*)"(?:\.\.\.)?,\s*(?:iov_len=)?(\d+)/.exec(
        line,
      );
    if (m) sends.push({ fd: Number(m[1]), head: m[2], bytes: Number(m[3]) });
  }
  return sends;
}

/** The sends on connections that carried an HTTP response (the clients' sockets). */
function clientSends(sends: Send[]): Send[] {
  const fds = new Set(sends.filter((s) => s.head.startsWith('HTTP/1.1 ')).map((s) => s.fd));
  return sends.filter((s) => fds.has(s.fd));
}

/**
 * Every send on the phone's socket (the one carrying WebSocket text frames, FIN + opcode 1 =
 * 0x81). The rest is background (the store's journal poll).
 */
function phoneFrames(sends: Send[]): Send[] {
  const fds = new Set(sends.filter((s) => s.head.startsWith('\\201')).map((s) => s.fd));
  return sends.filter((s) => fds.has(s.fd));
}

async function post(url: string, headers: Record<string, string>, body: unknown) {
  const r = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: JSON.stringify(body),
  });
  return { status: r.status, headers: r.headers, text: await r.text() };
}

async function openSession(mcpUrl: string, token: string): Promise<string> {
  const r = await post(
    mcpUrl,
    { accept: 'application/json, text/event-stream', 'x-api-key': token },
    {
      jsonrpc: '2.0',
      id: 0,
      method: 'initialize',
      params: { protocolVersion: SESSION_REVISION, capabilities: {}, clientInfo: { name: 't', version: '1' } },
    },
  );
  expect(r.status).toBe(200);
  return r.headers.get('mcp-session-id')!;
}

function sessionCall(mcpUrl: string, token: string, session: string, id: number, tool: string, args: object) {
  return post(
    mcpUrl,
    {
      accept: 'application/json',
      'x-api-key': token,
      'mcp-session-id': session,
      'mcp-protocol-version': SESSION_REVISION,
    },
    { jsonrpc: '2.0', id, method: 'tools/call', params: { name: tool, arguments: args } },
  );
}

function statelessCall(mcpUrl: string, token: string, id: number, tool: string, args: object) {
  return post(
    mcpUrl,
    {
      accept: 'application/json, text/event-stream',
      'x-api-key': token,
      'mcp-protocol-version': STATELESS_REVISION,
      'mcp-method': 'tools/call',
      'mcp-name': tool,
    },
    {
      jsonrpc: '2.0',
      id,
      method: 'tools/call',
      params: {
        name: tool,
        arguments: args,
        _meta: {
          'io.modelcontextprotocol/protocolVersion': STATELESS_REVISION,
          'io.modelcontextprotocol/clientInfo': { name: 't', version: '1' },
          'io.modelcontextprotocol/clientCapabilities': {},
        },
      },
    },
  );
}

afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('one node: answers produced in the phone socket handler and in a timer', () => {
  let relay: RelayChild;
  let agent: DeviceAgent;
  let token: string;
  let session: string;

  beforeAll(async () => {
    // A short request timeout: the timer scenario is a phone that answers too late.
    relay = await startRelayChild(['--port', '0', '--data-dir', join(dir, 'relay'), '--request-timeout-ms', '300']);
    const [qr] = await relay.pair(1);
    const stateDir = join(dir, 'phone');
    const identity = await DeviceAgent.pair({ stateDir, qr, name: 'one-write phone', log: silentLogger });
    agent = new DeviceAgent({ stateDir, createServer: () => createEchoServer(), log: silentLogger });
    agent.start();
    const until = Date.now() + 20_000;
    while (!(await relay.connections()).some((c) => c.deviceId === identity.device_id && c.initialized)) {
      if (Date.now() > until) throw new Error('phone did not connect');
      await new Promise((r) => setTimeout(r, 50));
    }
    [{ token }] = await relay.keys([identity.device_id]);
    session = await openSession(relay.mcpUrl, token);
    // Warm: the first call also fills the relay's caches (key, session).
    expect((await sessionCall(relay.mcpUrl, token, session, 1, 'echo', { text: 'warm' })).status).toBe(200);
  }, 60_000);

  afterAll(async () => {
    await agent?.stop();
    await relay?.stop();
  });

  it(`${SESSION_REVISION} session: each answer (written from the phone's frame) is one send, each frame to the phone one send`, async () => {
    const sends = await traceSends(relay.child.pid!, async () => {
      for (let i = 0; i < CALLS; i++) {
        const r = await sessionCall(relay.mcpUrl, token, session, 100 + i, 'echo', { text: `hello ${i}` });
        expect(r.status).toBe(200);
        expect(JSON.parse(r.text).result.content[0].text).toBe(`hello ${i}`);
      }
    });
    const answers = clientSends(sends);
    expect(answers.filter((s) => s.head.startsWith('HTTP/1.1 200')).length).toBe(CALLS);
    expect(answers.length).toBe(CALLS);
    expect(phoneFrames(sends).length).toBe(CALLS);
  });

  it(`${STATELESS_REVISION} (no session): each answer is one send`, async () => {
    const sends = await traceSends(relay.child.pid!, async () => {
      for (let i = 0; i < CALLS; i++) {
        const r = await statelessCall(relay.mcpUrl, token, 200 + i, 'echo', { text: `hi ${i}` });
        expect(r.status).toBe(200);
        expect(r.text).toContain(`hi ${i}`);
      }
    });
    const answers = clientSends(sends);
    expect(answers.filter((s) => s.head.startsWith('HTTP/1.1 200')).length).toBe(CALLS);
    expect(answers.length).toBe(CALLS);
    expect(phoneFrames(sends).length).toBe(CALLS);
  });

  it('an answer written from a timer (the request timeout) is one send', async () => {
    const n = 3;
    const sends = await traceSends(relay.child.pid!, async () => {
      for (let i = 0; i < n; i++) {
        const r = await sessionCall(relay.mcpUrl, token, session, 300 + i, 'sleep', { ms: 1500 });
        expect(JSON.parse(r.text).error.data.code).toBe('timeout');
      }
    });
    const answers = clientSends(sends);
    expect(answers.length).toBe(n);
  });

  it('SSE events (progress from the phone, then the answer) leave as whole events, not in pieces', async () => {
    const steps = 4;
    let body = '';
    const sends = await traceSends(relay.child.pid!, async () => {
      const r = await fetch(relay.mcpUrl, {
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          accept: 'application/json, text/event-stream',
          'x-api-key': token,
          'mcp-session-id': session,
          'mcp-protocol-version': SESSION_REVISION,
        },
        body: JSON.stringify({
          jsonrpc: '2.0',
          id: 400,
          method: 'tools/call',
          params: { name: 'progress', arguments: { text: 'p', n: steps, delayMs: 30 }, _meta: { progressToken: 't' } },
        }),
      });
      body = await r.text();
    });
    expect(body.match(/notifications\/progress/g)?.length).toBe(steps);
    expect(body).toContain('p done');
    const stream = clientSends(sends);
    // Head and ': open', the priming event, each progress event, the answer and the end:
    // at most one send each (fewer when neighbours share a turn). In pieces it was ~3 per event.
    expect(stream.length).toBeGreaterThanOrEqual(2);
    expect(stream.length).toBeLessThanOrEqual(steps + 4);
    expect(stream.every((s) => s.bytes > 2)).toBe(true); // no lone CRLF of a chunk
  });
});

describe('two nodes over Redis: the answer arrives as a bus message', () => {
  let tc: TestCluster;
  let token: string;

  beforeAll(async () => {
    tc = await startTestCluster({ nodes: 2 });
    const phone = await tc.phone({ node: tc.nodes[0] });
    token = await tc.key(phone.deviceId);
  }, 90_000);
  afterAll(async () => {
    await tc?.stop();
  });

  it('each answer on the node without the phone is one send, on both eras', async () => {
    const mcpUrl = `${tc.nodes[1].url}/mcp`;
    const session = await openSession(mcpUrl, token);
    expect((await sessionCall(mcpUrl, token, session, 1, 'echo', { text: 'warm' })).status).toBe(200);
    const sends = await traceSends(tc.nodes[1].proc.pid!, async () => {
      for (let i = 0; i < CALLS; i++) {
        const a = await sessionCall(mcpUrl, token, session, 10 + i, 'echo', { text: `s${i}` });
        expect(JSON.parse(a.text).result.content[0].text).toBe(`s${i}`);
        const b = await statelessCall(mcpUrl, token, 50 + i, 'echo', { text: `x${i}` });
        expect(b.text).toContain(`x${i}`);
      }
    });
    const answers = clientSends(sends);
    expect(answers.filter((s) => s.head.startsWith('HTTP/1.1 200')).length).toBe(2 * CALLS);
    expect(answers.length).toBe(2 * CALLS);
  });
});
