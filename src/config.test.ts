import { describe, expect, it } from 'vitest';
import { ConfigError, isLoopback, parseRelayConfig } from './config.ts';

describe('parseRelayConfig: where the relay listens', () => {
  it('refuses a non-loopback --host without --public-url (flag or environment)', () => {
    for (const host of ['0.0.0.0', '::', '10.0.0.5', 'relay.internal'])
      expect(() => parseRelayConfig(['--host', host], {}), host).toThrow(ConfigError);
    expect(() => parseRelayConfig([], { PHONEBRIDGE_HOST: '0.0.0.0' })).toThrow(/set --public-url/);
    expect(parseRelayConfig(['--host', '0.0.0.0', '--public-url', 'https://relay.example.com'], {})).toMatchObject({
      host: '0.0.0.0',
      relayHost: 'relay.example.com',
    });
    expect(
      parseRelayConfig([], { PHONEBRIDGE_HOST: '0.0.0.0', PHONEBRIDGE_PUBLIC_URL: 'https://r.example' }).publicUrl,
    ).toBe('https://r.example');
  });

  it('derives the public URL on loopback as before', () => {
    expect(parseRelayConfig(['--port', '8081'], {}).publicUrl).toBe('http://127.0.0.1:8081');
    expect(parseRelayConfig(['--host', '::1'], {}).publicUrl).toBe('http://[::1]:8080');
  });

  it('puts the admin port on 127.0.0.1 unless --admin-host / PHONEBRIDGE_ADMIN_HOST say otherwise', () => {
    expect(parseRelayConfig(['--host', '0.0.0.0', '--public-url', 'https://r.example'], {}).adminHost).toBe(
      '127.0.0.1',
    );
    expect(parseRelayConfig(['--admin-host', '10.1.2.3'], {}).adminHost).toBe('10.1.2.3');
    expect(parseRelayConfig([], { PHONEBRIDGE_ADMIN_HOST: '10.1.2.4' }).adminHost).toBe('10.1.2.4');
  });

  it('knows loopback addresses', () => {
    for (const h of ['127.0.0.1', '127.1.2.3', '::1', '[::1]', 'localhost', 'LOCALHOST'])
      expect(isLoopback(h), h).toBe(true);
    for (const h of ['0.0.0.0', '::', '128.0.0.1', '127.0.0.1.example.com', '10.0.0.1', ''])
      expect(isLoopback(h), h).toBe(false);
  });
});

describe('parseRelayConfig: numeric flags', () => {
  it('refuses a port above 65535 instead of listening on it modulo 65536 (99999 → 34463)', () => {
    expect(() => parseRelayConfig(['--admin-port', '99999'], {})).toThrow(
      /--admin-port must be a port number \(0 to 65535\), got "99999"/,
    );
    expect(() => parseRelayConfig(['--port', '70000', '--public-url', 'https://r.example'], {})).toThrow(
      /--port must be a port number/,
    );
    expect(() => parseRelayConfig([], { PHONEBRIDGE_ADMIN_PORT: '65536' })).toThrow(ConfigError);
    expect(parseRelayConfig(['--port', '65535', '--admin-port', '0'], {})).toMatchObject({
      port: 65535,
      adminPort: 0,
    });
  });

  it('reads integers as plain decimal: hex, exponents and blanks are refused, not read as other numbers', () => {
    for (const raw of ['0x50', '1e3', ' ', ' 8080', '+80', '8080.0'])
      expect(() => parseRelayConfig(['--port', raw], {}), JSON.stringify(raw)).toThrow(
        new ConfigError(`--port must be a non-negative integer, got "${raw}"`),
      );
    expect(() => parseRelayConfig([], { PHONEBRIDGE_MAX_BATCH: '0x10' })).toThrow(/--max-batch must be/);
  });
});

describe('parseRelayConfig: durations', () => {
  it('refuses a millisecond flag past 2^31 - 1, which Node timers would run after 1 ms (a journal poll every millisecond)', () => {
    for (const flag of ['request-timeout-ms', 'device-idle-ms', 'session-idle-ms', 'drain-ms', 'control-poll-ms'])
      expect(() => parseRelayConfig([`--${flag}`, '3000000000'], {}), flag).toThrow(
        new ConfigError(`--${flag} must be at most 2147483647 ms (about 24.8 days), got "3000000000"`),
      );
    expect(() => parseRelayConfig([], { PHONEBRIDGE_CONTROL_POLL_MS: '2147483648' })).toThrow(/--control-poll-ms/);
    expect(parseRelayConfig(['--drain-ms', '2147483647'], {}).drainMs).toBe(2147483647);
  });
});

describe('parseRelayConfig: --log-level', () => {
  it("refuses a level pino does not know with the flag's name (it was exit 1 with pino's own words)", () => {
    expect(() => parseRelayConfig(['--log-level', 'loud'], {})).toThrow(
      new ConfigError('--log-level must be one of fatal, error, warn, info, debug, trace, silent, got "loud"'),
    );
    expect(() => parseRelayConfig([], { PHONEBRIDGE_LOG_LEVEL: 'verbose' })).toThrow(/--log-level must be one of/);
    for (const level of ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'])
      expect(parseRelayConfig(['--log-level', level], {}).logLevel).toBe(level);
  });
});

describe('parseRelayConfig: durations that cannot be zero', () => {
  it('refuses 0 for the request timeout and the session and phone idle limits (every session ended at once: 404 on the next request)', () => {
    for (const flag of ['request-timeout-ms', 'session-idle-ms', 'device-idle-ms'])
      expect(() => parseRelayConfig([`--${flag}`, '0'], {}), flag).toThrow(
        new ConfigError(`--${flag} must be at least 1 ms, got "0"`),
      );
    expect(() => parseRelayConfig([], { PHONEBRIDGE_SESSION_IDLE_MS: '0' })).toThrow(/--session-idle-ms/);
    // A drain of 0 is an immediate exit, which is a choice.
    expect(parseRelayConfig(['--drain-ms', '0', '--session-idle-ms', '300'], {})).toMatchObject({
      drainMs: 0,
      sessionIdleMs: 300,
    });
  });
});
