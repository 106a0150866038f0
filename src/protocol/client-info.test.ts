import { describe, expect, it } from 'vitest';
import { clientInfoOf } from './client-info.ts';

describe('clientInfoOf', () => {
  it('keeps name and version, printable and short', () => {
    expect(clientInfoOf({ clientInfo: { name: 'mcp-remote', version: '0.1.15', title: 'x' } })).toEqual({
      name: 'mcp-remote',
      version: '0.1.15',
    });
    expect(clientInfoOf({ clientInfo: { name: ' a\u0000b\n ' } })).toEqual({ name: 'ab' });
    expect(clientInfoOf({ clientInfo: { name: 'n'.repeat(500), version: 'v'.repeat(500) } })).toEqual({
      name: 'n'.repeat(100),
      version: 'v'.repeat(40),
    });
  });
  it('gives nothing for a missing or malformed clientInfo', () => {
    for (const p of [
      undefined,
      null,
      'x',
      {},
      { clientInfo: 'x' },
      { clientInfo: { name: 3 } },
      { clientInfo: { name: ' ' } },
    ])
      expect(clientInfoOf(p)).toBeUndefined();
    expect(clientInfoOf({ clientInfo: { name: 'a', version: 7 } })).toEqual({ name: 'a' });
  });
});
