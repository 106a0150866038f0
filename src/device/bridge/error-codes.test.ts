// The codes the bridge puts in a tool error (errorResult in this folder) reach MCP clients like the
// phone's own, so each is in ERROR_CODES and so in docs/TOOLS.md's table, which promises every code
// a tool call can return.
import { readdirSync, readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { ERROR_CODES } from '../tools/contract.ts';

const here = new URL('./', import.meta.url);
const sources = readdirSync(here)
  .filter((f) => f.endsWith('.ts') && !f.endsWith('.test.ts'))
  .map((f) => readFileSync(new URL(f, here), 'utf8'));
const bridgeCodes = [...new Set(sources.flatMap((s) => [...s.matchAll(/errorResult\('([a-z_]+)'/g)].map((m) => m[1])))];
const toolsDoc = readFileSync(new URL('../../../docs/TOOLS.md', import.meta.url), 'utf8');

describe('the tool error codes of the bridge', () => {
  it('are found in the sources (upstream_unavailable among them)', () => {
    expect(bridgeCodes).toContain('upstream_unavailable');
  });

  it.each(bridgeCodes)('%s is in ERROR_CODES and in the docs/TOOLS.md table', (code) => {
    expect(Object.keys(ERROR_CODES)).toContain(code);
    expect(toolsDoc).toContain(`| \`${code}\` |`);
  });
});
