// docs/OPERATIONS.md, "`phonebridge serve` flags": "Every flag has an environment twin
// `PHONEBRIDGE_<FLAG>` …; a flag wins over the environment" (the CLI contract: "`phonebridge
// serve` — flags mirror env vars `PHONEBRIDGE_<FLAG>`"). The other way round too: a setting serve
// reads from PHONEBRIDGE_API_REQUESTS_PER_MINUTE has its flag, --api-requests-per-minute, read
// and refused alike (src/config.ts).
import { describe, expect, it } from 'vitest';
import { ConfigError, parseRelayConfig, SERVE_FLAGS } from '../../src/config.ts';

const ENV = 'PHONEBRIDGE_API_REQUESTS_PER_MINUTE';

describe('--api-requests-per-minute, the twin of PHONEBRIDGE_API_REQUESTS_PER_MINUTE', () => {
  it('is a serve flag (serve --help lists it)', () => {
    expect(SERVE_FLAGS.map((f) => f.name)).toContain('api-requests-per-minute');
    expect(parseRelayConfig(['--api-requests-per-minute', '100'], {}).apiRequestsPerMinute).toBe(100);
  });

  it('wins over the environment; the environment alone still sets it; neither leaves the default', () => {
    expect(parseRelayConfig(['--api-requests-per-minute', '100'], { [ENV]: '7' }).apiRequestsPerMinute).toBe(100);
    expect(parseRelayConfig([], { [ENV]: '7' }).apiRequestsPerMinute).toBe(7);
    expect(parseRelayConfig([], {}).apiRequestsPerMinute).toBeUndefined();
    // A good flag wins over an unreadable twin, as every flag does.
    expect(parseRelayConfig(['--api-requests-per-minute', '100'], { [ENV]: '100/min' }).apiRequestsPerMinute).toBe(100);
  });

  it('refuses what its twin refuses, naming the flag', () => {
    for (const value of ['100/min', '0', '-1', '0x10', '1e3', ' 100'])
      expect(() => parseRelayConfig([`--api-requests-per-minute=${value}`], {}), value).toThrow(
        new ConfigError(`--api-requests-per-minute must be a positive decimal integer, got "${value}"`),
      );
  });
});
