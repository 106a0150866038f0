// The MCP Inspector's tool-schema portability report on the reference phone's catalog, read
// through the relay as a client sees it (docs/decisions/0180-portable-tool-schemas.md): the
// Inspector 2.x CLI (`--method tools/list --strict`) must find nothing. A phone whose schemas
// use a type array (what the SDK writes for a nullable field) is reported, so the check bites.
// The Inspector needs Node >= 22.19: Node 22 and the Inspector come from the npm cache through
// npx (offline first, as the conformance run gets its suite), never from package.json (the
// `node` package would put Node 22 first on PATH for every npm script).
import { execFile } from 'node:child_process';
import { tmpdir } from 'node:os';
import { promisify } from 'node:util';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { createPhoneServer } from '../../src/device/tools/index.ts';
import { TOOL_CATALOG } from '../../src/device/tools/server.ts';
import { startTestPhone, startTestRelay, type TestPhone, type TestRelay } from '../helpers/relay.ts';
import { SimPhone } from './helpers.ts';

const run = promisify(execFile);
const INSPECTOR = ['-p', 'node@22.23.3', '-p', '@modelcontextprotocol/inspector@2.12.0'];

let relay: TestRelay;
let demo: TestPhone;
let nullable: TestPhone;
let inspector: string;

/** The Inspector CLI from the npm cache (a download only when the cache lacks it). */
async function resolveInspector(): Promise<string> {
  for (const mode of ['--offline', '--prefer-offline']) {
    try {
      const { stdout } = await run('npx', ['-y', mode, ...INSPECTOR, '-c', 'command -v mcp-inspector'], {
        cwd: tmpdir(),
        timeout: 240_000,
      });
      if (stdout.trim()) return stdout.trim();
    } catch {
      /* not cached: try the registry */
    }
  }
  throw new Error('npx could not resolve @modelcontextprotocol/inspector@2.12.0 with Node 22');
}

async function report(phone: TestPhone): Promise<{ code: number; stdout: string; stderr: string }> {
  const key = (await relay.key(phone.deviceId)).token;
  const args = [
    '--cli',
    '--transport',
    'http',
    '--server-url',
    relay.mcpUrl,
    '--header',
    `X-Api-Key: ${key}`,
    '--method',
    'tools/list',
    '--strict',
  ];
  // mcp-inspector's `#!/usr/bin/env node` must find Node 22: its own bin directory goes first.
  const env = { ...process.env, PATH: `${inspector.replace(/\/mcp-inspector$/, '')}:${process.env.PATH ?? ''}` };
  try {
    const { stdout, stderr } = await run(inspector, args, { env, cwd: tmpdir(), timeout: 120_000 });
    return { code: 0, stdout, stderr };
  } catch (error) {
    const e = error as { code?: number; stdout?: string; stderr?: string };
    return { code: typeof e.code === 'number' ? e.code : -1, stdout: e.stdout ?? '', stderr: e.stderr ?? '' };
  }
}

beforeAll(async () => {
  inspector = await resolveInspector();
  relay = await startTestRelay();
  demo = await startTestPhone(relay, () => createPhoneServer({ phone: new SimPhone({ seed: 3 }), deviceId: 'demo' }));
  nullable = await startTestPhone(
    relay,
    () => {
      const mcp = new McpServer({ name: 'nullable', version: '1' });
      mcp.registerTool(
        'maybe',
        {
          description: 'Takes a nullable string',
          inputSchema: { note: z.string().nullable() },
          annotations: { readOnlyHint: true },
          _meta: { 'phonebridge/scope': 'devices:read' },
        },
        () => ({ content: [{ type: 'text', text: 'ok' }] }),
      );
      return mcp;
    },
    { name: 'nullable' },
  );
}, 300_000);
afterAll(async () => {
  await demo?.stop();
  await nullable?.stop();
  await relay?.stop();
});

describe('the Inspector portability report', () => {
  it('is empty for the reference phone’s whole catalog', async () => {
    const r = await report(demo);
    expect(r.stderr.trim(), r.stderr).toBe('');
    expect(r.code).toBe(0);
    const listed = (JSON.parse(r.stdout) as { tools: Array<{ name: string }> }).tools.map((t) => t.name);
    expect(listed.sort()).toEqual(TOOL_CATALOG.map((t) => t.name).sort());
  }, 120_000);

  it('reports a type array, so an empty report means something', async () => {
    const r = await report(nullable);
    expect(r.stderr).toContain('tool "maybe"');
    expect(r.stderr).toContain('`type` is an array');
  }, 120_000);
});
