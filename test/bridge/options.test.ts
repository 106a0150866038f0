// Start-up checks of the bridge: wrong options and a broken upstream stop `device run` with a clear message.
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import type { Tool } from '@modelcontextprotocol/sdk/types.js';
import { silentLogger } from '../../src/device/agent/agent.ts';
import { bridgeServerFactory, loadScopeMap, scopeFor } from '../../src/device/bridge/index.ts';
import { startChild } from '../helpers/processes.ts';

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
    const lines: string[] = [];
    const log = { info: (m: string) => void lines.push(m), warn: (m: string) => void lines.push(m), error() {} };
    await expect(bridgeServerFactory({ upstreamCmd: 'no-such-mcp-server --token sk-0123', log })).rejects.toThrow(
      /^bridge: could not start the upstream MCP server "no-such-mcp-server": command not found \(ENOENT; exit status 127 before initialize\)$/,
    );
    expect(lines).toEqual([]); // not the write to its stdin that failed (EPIPE) as well
    const notExecutable = scopeMapFile('{}'); // a file without the x bit
    await expect(bridgeServerFactory({ upstreamCmd: `'${notExecutable}' --x`, log })).rejects.toThrow(
      `bridge: could not start the upstream MCP server "${notExecutable}": not executable (EACCES; exit status 126 before initialize)`,
    );
    // The shell takes a NAME=value first word for the program; its value may be a secret.
    await expect(bridgeServerFactory({ upstreamCmd: 'API_KEY=sk-0123 server', log })).rejects.toThrow(
      /server "API_KEY=…": command not found/,
    );
    await expect(bridgeServerFactory({ upstreamUrl: 'http://127.0.0.1:1/mcp', log: silentLogger })).rejects.toThrow(
      /could not start the upstream MCP server http:\/\/127\.0\.0\.1:1\/mcp/,
    );
  });

  it('`device run` exits non-zero with one line that names the program and none of its arguments', async () => {
    const state = mkdtempSync(join(tmpdir(), 'bridge-state-'));
    const child = startChild([
      'device',
      'run',
      '--state',
      state,
      '--backend',
      'bridge',
      '--upstream-cmd',
      'no-such-mcp-server --token sk-0123',
    ]);
    const { code } = await child.exited;
    expect(code).toBe(1);
    // The shell's own diagnostic comes on the upstream's stderr, which the bridge passes through.
    expect(child.stderr.filter((line) => !line.startsWith('sh:'))).toEqual([
      'phonebridge: bridge: could not start the upstream MCP server "no-such-mcp-server": command not found (ENOENT; exit status 127 before initialize)',
    ]);
    expect(child.stderr.join('\n')).not.toContain('sk-0123');
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
