// The bridge in front of an upstream that breaks the protocol (test/bridge/rogue-upstream.ts, a
// real process over stdio): what the MCP client gets, what the operator's log says, and that
// the bridge keeps its upstream and its socket to the relay when it should.
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { bridgeServerFactory, type BridgeOptions, type BridgeServerFactory } from '../../src/device/bridge/index.ts';
import type { AgentLogger } from '../../src/device/agent/agent.ts';
import { SHARED_LINE_ANSWER } from '../../src/device/bridge/line-reader.ts';
import { programOf } from '../../src/device/bridge/upstream.ts';
import { connectClient, startTestPhone, startTestRelay, type TestPhone, type TestRelay } from '../helpers/relay.ts';
import { connectToBridge, tsxCommand, useBridge, waitFor } from './connect.ts';
/** What every payload of test/bridge/rogue-upstream.ts carries. */
const SECRET = 'sk-rogue-0123456789';

const ROGUE = fileURLToPath(new URL('./rogue-upstream.ts', import.meta.url));

/** A logger that keeps every line, to check what reaches the operator's log. */
function recordingLog(): AgentLogger & { lines: string[] } {
  const lines: string[] = [];
  return {
    lines,
    info: (msg) => void lines.push(msg),
    warn: (msg) => void lines.push(msg),
    error: (msg) => void lines.push(msg),
  };
}

/** A bridge over the rogue upstream in `mode`, with an in-memory SDK client, for one describe block. */
function useRogueBridge(mode = 'normal', options: Omit<BridgeOptions, 'upstreamCmd' | 'log'> = {}) {
  const log = recordingLog();
  return Object.assign(useBridge(`${tsxCommand(ROGUE)} ${mode}`, log, options), { log });
}

describe('an upstream whose tools/list result is malformed', () => {
  const b = useRogueBridge('bad-list');

  it('gets a clear error and the upstream is kept, not restarted', async () => {
    const pid = b.factory.upstream.pid;
    await expect(b.client.listTools()).rejects.toThrow(/the bridged MCP server sent a malformed tools\/list result/);
    const err = await b.client.listTools().then(
      () => 'listed',
      (e: Error) => e.message,
    );
    expect(err).toMatch(/malformed tools\/list result: tools: Invalid input: expected array/);
    expect(err).not.toContain(SECRET);
    expect(b.factory.upstream.connected).toBe(true);
    expect(b.factory.upstream.pid).toBe(pid);
    expect(b.log.lines.filter((line) => line.includes('lost the upstream'))).toEqual([]);
  });
});

describe('an upstream that writes its logs to stdout', () => {
  const b = useRogueBridge('normal', { dropWarnings: { first: 3, summaryEveryMs: 100 } });

  it('gets a warning for the first few lines, then counts of the rest, without their content', async () => {
    const result = await b.client.callTool({ name: 'garbage-flood', arguments: {} });
    expect(textOf(result)).toBe('after 1000 lines');
    const warnings = () => b.log.lines.filter((line) => line.includes('dropped a line that is not JSON'));
    const counted = () =>
      b.log.lines
        .map((line) => /dropped (\d+) more non-JSON lines?$/.exec(line))
        .reduce((sum, m) => sum + (m ? Number(m[1]) : 0), 0);
    await waitFor(() => warnings().length + counted() === 1000);
    expect(warnings()).toHaveLength(3);
    expect(b.log.lines.length).toBeLessThan(10); // counts come every 100 ms here, not one per line
    expect(b.log.lines.join('\n')).not.toContain(SECRET);
    expect(b.factory.upstream.connected).toBe(true);
  });
});

/** The rogue upstream behind a real relay: phone agent on a WebSocket, SDK client over HTTP. */
function useRogueBehindRelay(mode = 'normal') {
  const b = { log: recordingLog() } as {
    log: ReturnType<typeof recordingLog>;
    relay: TestRelay;
    factory: BridgeServerFactory;
    phone: TestPhone;
    client: Client;
  };
  beforeAll(async () => {
    b.relay = await startTestRelay(['--request-timeout-ms', '3000']);
    b.factory = await bridgeServerFactory({ upstreamCmd: `${tsxCommand(ROGUE)} ${mode}`, log: b.log });
    b.phone = await startTestPhone(b.relay, b.factory);
    ({ client: b.client } = await connectClient(b.relay.mcpUrl, (await b.relay.key(b.phone.deviceId)).token));
  }, 60_000);
  afterAll(async () => {
    await b.client?.close();
    await b.phone?.stop();
    await b.factory?.close();
    await b.relay?.stop();
  });
  return b;
}

const textOf = (result: unknown) => ((result as CallToolResult).content[0] as { text: string }).text;

describe('an upstream that writes what nobody asked for, behind a relay', () => {
  const b = useRogueBehindRelay();

  it('answers the call and logs what was dropped without its content', async () => {
    const call = (name: string) => b.client.callTool({ name, arguments: {} }).then(textOf);
    expect(await call('garbage')).toBe('after garbage'); // a non-JSON line, then a non-JSON-RPC one
    expect(await call('stray-id')).toBe('after stray'); // an answer to an id never sent
    expect(await call('twice')).toBe('first'); // the same id answered twice
    expect(b.phone.agent.connected).toBe(true);
    expect(b.factory.upstream.connected).toBe(true);
    const log = b.log.lines.join('\n');
    expect(log).toMatch(/dropped a line that is not JSON/);
    expect(log).toMatch(/dropped an answer to a request it did not send or that was already answered/);
    expect(log).not.toContain(SECRET);
  });

  it('a call whose answer shares its line with what follows fails at once, saying why', async () => {
    for (const name of ['run-together', 'run-into-log']) {
      const started = Date.now();
      const err = await b.client.callTool({ name, arguments: {} }).then(
        () => 'answered',
        (e: Error) => e.message,
      );
      expect(err).toBe(`MCP error -32603: ${SHARED_LINE_ANSWER}`);
      expect(Date.now() - started).toBeLessThan(2_000); // not the relay's 3 s deadline
    }
    // The next line is read as usual.
    expect(await b.client.callTool({ name: 'stray-id', arguments: {} }).then(textOf)).toBe('after stray');
    expect(b.phone.agent.connected).toBe(true);
    expect(b.factory.upstream.connected).toBe(true);
    const log = b.log.lines.join('\n');
    expect(log).toMatch(/dropped a line that held a message and more output/);
    expect(log).not.toContain(SECRET);
  });

  it('a call the upstream never answers ends at the relay deadline, and the cancel reaches the upstream', async () => {
    const started = Date.now();
    await expect(b.client.callTool({ name: 'hang', arguments: {} })).rejects.toThrow(/did not answer in time/);
    expect(Date.now() - started).toBeLessThan(6_000); // --request-timeout-ms 3000
    // The upstream lists the request ids of the notifications/cancelled it received.
    await waitFor(async () => JSON.parse(await b.client.callTool({ name: 'cancelled-seen' }).then(textOf)).length > 0);
    expect(b.phone.agent.connected).toBe(true);
  });
});

describe('an upstream that crashes mid-request, behind a relay', () => {
  const b = useRogueBehindRelay();

  it('fails the call at once with upstream_unavailable, names no command line, and comes back', async () => {
    const pid = b.factory.upstream.pid;
    const started = Date.now();
    const result = (await b.client.callTool({ name: 'crash', arguments: {} })) as CallToolResult;
    expect(Date.now() - started).toBeLessThan(2_000); // not the relay's 3 s deadline
    expect(result.isError).toBe(true);
    const { error } = JSON.parse(textOf(result)) as { error: { code: string; message: string } };
    expect(error.code).toBe('upstream_unavailable');
    expect(error.message).toMatch(/^the bridged MCP server is unavailable: the connection closed/);
    // The command is the operator's (paths, maybe a token in an argument), not the caller's.
    expect(error.message).not.toContain('rogue-upstream');
    // The operator's log names the program only: the arguments may carry secrets too.
    const lost = b.log.lines.filter((line) => line.includes('lost the upstream'));
    expect(lost.length).toBeGreaterThan(0);
    expect(lost.every((line) => line.includes(`"${programOf(tsxCommand(ROGUE))}"`))).toBe(true);
    expect(b.log.lines.filter((line) => line.includes('rogue-upstream'))).toEqual([]);
    expect(b.phone.agent.connected).toBe(true);
    await waitFor(() => b.factory.upstream.connected && b.factory.upstream.pid !== pid, 10_000);
    expect(await b.client.callTool({ name: 'stray-id', arguments: {} }).then(textOf)).toBe('after stray');
  });
});

describe('an upstream that fails its initialize', () => {
  it('stops the bridge with a clear error, and the process is gone when it does', async () => {
    const pidFile = join(mkdtempSync(join(tmpdir(), 'rogue-')), 'pid');
    await expect(
      bridgeServerFactory({ upstreamCmd: `${tsxCommand(ROGUE)} bad-init '${pidFile}'`, log: recordingLog() }),
    ).rejects.toThrow(/could not start the upstream MCP server .*protocol version is not supported: 1999-01-01/);
    // `device run` exits right after this error: a child still running then would be orphaned.
    const pid = Number(readFileSync(pidFile, 'utf8'));
    expect(() => process.kill(pid, 0)).toThrow(/ESRCH/);
  }, 30_000);

  it('one that never answers is given up after the bound, named without its arguments, and is gone', async () => {
    const pidFile = join(mkdtempSync(join(tmpdir(), 'rogue-')), 'pid');
    const log = recordingLog();
    const started = Date.now();
    // A plain node script, not the tsx one: it must have written its pid before the bound ends
    // even on a loaded machine (tsx takes a second or more to start there).
    const silent = `require("node:fs").writeFileSync(process.argv[1], String(process.pid)); setInterval(() => {}, 60000)`;
    const err = await bridgeServerFactory({
      upstreamCmd: `'${process.execPath}' -e '${silent}' '${pidFile}'`,
      log,
      initializeTimeoutMs: 2000,
    }).then(
      (f) => f.close().then(() => 'started'),
      (e: Error) => e.message,
    );
    // The program only: the arguments are the operator's (paths, maybe a token).
    expect(err).toBe(
      `bridge: could not start the upstream MCP server "${process.execPath}": the upstream did not answer initialize within 2 s`,
    );
    // The bound, then the close (stdin ended, 2 s, SIGTERM): not the SDK's 60 s.
    expect(Date.now() - started).toBeLessThan(10_000);
    const pid = Number(readFileSync(pidFile, 'utf8'));
    expect(() => process.kill(pid, 0)).toThrow(/ESRCH/);
    expect(log.lines).toEqual([]);
  }, 30_000);

  it('one that exits before answering says so, with its exit status', async () => {
    await expect(
      bridgeServerFactory({ upstreamCmd: `${tsxCommand(ROGUE)} exit-at-start`, log: recordingLog() }),
    ).rejects.toThrow(
      `bridge: could not start the upstream MCP server "${process.execPath}": it exited with status 7 before answering initialize`,
    );
  });
});

describe('an upstream whose tools/list is over one frame, behind a relay', () => {
  const b = useRogueBehindRelay('huge-list');

  it('reaches the client whole, in pages of the bridge that each fit a frame, and the phone stays connected', async () => {
    const { tools } = await b.client.listTools();
    expect(tools.filter((t) => t.name.startsWith('filler_'))).toHaveLength(3000);
    expect(new Set(tools.map((t) => t.name)).size).toBe(tools.length);
    expect(b.phone.agent.connected).toBe(true);
  });

  it('refuses a cursor the bridge did not give with -32602', async () => {
    const direct = await connectToBridge(b.factory);
    try {
      await expect(direct.listTools({ cursor: 'elsewhere:3' })).rejects.toThrow(/unknown tools\/list cursor/);
      const first = await direct.listTools();
      expect(first.nextCursor).toMatch(/^phonebridge-tools:\d+$/);
      expect(Buffer.byteLength(JSON.stringify(first))).toBeLessThan(256 * 1024);
    } finally {
      await direct.close();
    }
  });
});

describe('an upstream whose tools/list has one invalid entry', () => {
  const b = useRogueBridge('bad-tool');

  it('lists every valid tool and logs which entry it dropped, without its content', async () => {
    const { tools } = await b.client.listTools();
    expect(tools.length).toBeGreaterThan(0);
    expect(tools.every((t) => typeof t.name === 'string')).toBe(true);
    const log = b.log.lines.join('\n');
    expect(log).toMatch(/dropped tool #\d+ of the upstream's tools\/list: name: /);
    expect(log).not.toContain(SECRET);
  });
});
