// Settings whose value the relay cannot read stop the start (ConfigError, exit 2, one line naming
// the setting) instead of being replaced in silence: PHONEBRIDGE_API_REQUESTS_PER_MINUTE must be a
// positive decimal integer, and a switch's environment twin (PHONEBRIDGE_TRUST_PROXY,
// PHONEBRIDGE_HOSTED, PHONEBRIDGE_EXIT_WITH_PARENT) true/false, 1/0 or yes/no in any case
// (src/config.ts; docs/OPERATIONS.md, "`phonebridge serve` flags" and "Limits").
import { afterAll, describe, expect, it } from 'vitest';
import { rmSync } from 'node:fs';
import { apiRequestsPerMinute, parseRelayConfig, ConfigError } from '../../src/config.ts';
import { tempDir } from '../helpers/relay.ts';
import { startChild, type Child } from '../helpers/processes.ts';

const children: Child[] = [];
const dirs: string[] = [];
afterAll(async () => {
  await Promise.all(children.map((c) => c.kill('SIGKILL')));
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

async function serveExit(env: Record<string, string>): Promise<{ code: number | null; stderr: string }> {
  const d = tempDir('pb-settings-');
  dirs.push(d);
  const child = startChild(['serve', '--port', '0', '--admin-port', '0', '--data-dir', d], env);
  children.push(child);
  const killer = setTimeout(() => child.proc.kill('SIGKILL'), 30_000);
  const { code } = await child.exited;
  clearTimeout(killer);
  return { code, stderr: child.stderr.join('\n') };
}

describe('PHONEBRIDGE_API_REQUESTS_PER_MINUTE', () => {
  it('reads a positive decimal integer; absent or empty leaves the default', () => {
    expect(apiRequestsPerMinute({ PHONEBRIDGE_API_REQUESTS_PER_MINUTE: '100' })).toBe(100);
    expect(apiRequestsPerMinute({})).toBeUndefined();
    expect(apiRequestsPerMinute({ PHONEBRIDGE_API_REQUESTS_PER_MINUTE: '' })).toBeUndefined();
  });

  it('refuses what is not one ("100/min", "0", "-1", "0x10", "1e3")', () => {
    for (const value of ['100/min', '0', '-1', '0x10', '1e3', ' 100'])
      expect(() => apiRequestsPerMinute({ PHONEBRIDGE_API_REQUESTS_PER_MINUTE: value }), value).toThrow(
        new ConfigError(`PHONEBRIDGE_API_REQUESTS_PER_MINUTE must be a positive decimal integer, got "${value}"`),
      );
  });

  it('serve\'s settings with "100/min" are refused, not run on the default', () => {
    expect(() => parseRelayConfig([], { PHONEBRIDGE_API_REQUESTS_PER_MINUTE: '100/min' })).toThrow(
      new ConfigError('PHONEBRIDGE_API_REQUESTS_PER_MINUTE must be a positive decimal integer, got "100/min"'),
    );
    expect(parseRelayConfig([], { PHONEBRIDGE_API_REQUESTS_PER_MINUTE: '100' }).apiRequestsPerMinute).toBe(100);
  });

  it('`phonebridge serve` with it exits 2 with one line naming it', async () => {
    const r = await serveExit({ PHONEBRIDGE_API_REQUESTS_PER_MINUTE: '-1' });
    expect(r.code, r.stderr).toBe(2);
    expect(r.stderr).toBe(
      'phonebridge: PHONEBRIDGE_API_REQUESTS_PER_MINUTE must be a positive decimal integer, got "-1"',
    );
  }, 60_000);
});

describe("a switch's environment twin", () => {
  it('reads true/false, 1/0 and yes/no in any case; empty is off', () => {
    const trustProxy = (value: string) => parseRelayConfig([], { PHONEBRIDGE_TRUST_PROXY: value }).trustProxy;
    for (const value of ['true', 'TRUE', 'True', '1', 'yes', 'YES']) expect(trustProxy(value), value).toBe(true);
    for (const value of ['false', 'FALSE', '0', 'no', 'No', '']) expect(trustProxy(value), value).toBe(false);
    expect(parseRelayConfig([], { PHONEBRIDGE_HOSTED: 'True' }).hosted).toBe(true);
    expect(parseRelayConfig([], { PHONEBRIDGE_EXIT_WITH_PARENT: 'NO' }).exitWithParent).toBe(false);
  });

  it('refuses any other value (on, off, enabled, 2), naming the variable, rather than taking it as off', () => {
    for (const value of ['on', 'off', 'enabled', '2', ' true'])
      expect(() => parseRelayConfig([], { PHONEBRIDGE_TRUST_PROXY: value }), value).toThrow(
        new ConfigError(`PHONEBRIDGE_TRUST_PROXY (--trust-proxy) must be true or false (1/0, yes/no), got "${value}"`),
      );
    expect(() => parseRelayConfig([], { PHONEBRIDGE_HOSTED: 'on' })).toThrow(/^PHONEBRIDGE_HOSTED \(--hosted\)/);
  });

  it('a flag on the command line wins over an unreadable twin, as every flag does', () => {
    expect(parseRelayConfig(['--trust-proxy'], { PHONEBRIDGE_TRUST_PROXY: 'on' }).trustProxy).toBe(true);
  });

  it('`phonebridge serve` with PHONEBRIDGE_TRUST_PROXY=on exits 2 with one line naming it', async () => {
    const r = await serveExit({ PHONEBRIDGE_TRUST_PROXY: 'on' });
    expect(r.code, r.stderr).toBe(2);
    expect(r.stderr).toBe(
      'phonebridge: PHONEBRIDGE_TRUST_PROXY (--trust-proxy) must be true or false (1/0, yes/no), got "on"',
    );
  }, 60_000);
});
