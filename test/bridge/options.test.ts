// Start-up checks of the bridge: wrong options and a broken upstream stop `device run` with a clear message.
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import type { Tool } from '@modelcontextprotocol/sdk/types.js';
import { silentLogger } from '../../src/device/agent/agent.ts';
import { bridgeServerFactory, loadScopeMap, scopeFor } from '../../src/device/bridge/index.ts';

const tool = (name: string, readOnlyHint?: boolean): Tool => ({
  name,
  inputSchema: { type: 'object' },
  ...(readOnlyHint !== undefined && { annotations: { readOnlyHint } }),
});

function scopeMapFile(content: string): string {
  const path = join(mkdtempSync(join(tmpdir(), 'bridge-')), 'scopes.json');
  writeFileSync(path, content);
  return path;
}

describe('bridge options', () => {
  it('needs exactly one upstream', async () => {
    await expect(bridgeServerFactory({})).rejects.toThrow(/exactly one of --upstream-cmd or --upstream-url/);
    await expect(bridgeServerFactory({ upstreamCmd: 'x', upstreamUrl: 'http://127.0.0.1:1/' })).rejects.toThrow(
      /exactly one/,
    );
  });

  it('fails clearly when the upstream cannot start', async () => {
    await expect(bridgeServerFactory({ upstreamCmd: 'no-such-mcp-server --flag', log: silentLogger })).rejects.toThrow(
      /could not start the upstream MCP server "no-such-mcp-server --flag": .*closed/i,
    );
    await expect(bridgeServerFactory({ upstreamUrl: 'http://127.0.0.1:1/mcp', log: silentLogger })).rejects.toThrow(
      /could not start the upstream MCP server http:\/\/127\.0\.0\.1:1\/mcp/,
    );
  });

  it('checks the scope map file', () => {
    expect(loadScopeMap(scopeMapFile('{"tap": "devices:act", "peek": "devices:read"}'))).toEqual({
      tap: 'devices:act',
      peek: 'devices:read',
    });
    expect(() => loadScopeMap(scopeMapFile('{"tap": "devices:write"}'))).toThrow(
      /must map tool names to one of devices:read, devices:act, devices:lease, runs:start/,
    );
    expect(() => loadScopeMap(scopeMapFile('not json'))).toThrow(/--scope-map .*scopes\.json/);
  });

  it('derives scopes from readOnlyHint unless the map names the tool', () => {
    const map = { write_note: 'runs:start' } as const;
    expect(scopeFor(tool('read_note', true), map)).toBe('devices:read');
    expect(scopeFor(tool('delete_note', false), map)).toBe('devices:act');
    expect(scopeFor(tool('no_annotations'), map)).toBe('devices:act');
    expect(scopeFor(tool('write_note', true), map)).toBe('runs:start');
    expect(scopeFor(tool('constructor'), map)).toBe('devices:act'); // not Object.prototype's
  });
});
