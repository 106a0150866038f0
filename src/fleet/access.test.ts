import { describe, expect, it } from 'vitest';
import type { Credential } from '../gateway/auth.ts';
import { deviceKeyOnUrl, fleetAccess, shown } from './access.ts';
import type { ResolvedFleetKey } from './keys.ts';

describe('refusals quote what the caller sent, bounded', () => {
  const long = 'x'.repeat(3000);
  const cred = { token: { deviceId: 'dev_own' } } as unknown as Credential;

  it('a device key on another phone: the URL id cut at 64 characters, control characters escaped', () => {
    const r = deviceKeyOnUrl(cred, `${long}\u0000`);
    expect(r).toMatchObject({ status: 403, code: 'wrong_device' });
    const message = (r as { message: string }).message;
    expect(message).toContain(`fleet key for ${'x'.repeat(64)}…`);
    expect(message.length).toBeLessThan(250);
    expect(deviceKeyOnUrl(cred, 'a\u0000b')).toMatchObject({ message: expect.stringContaining('a\\u0000b') });
    expect(deviceKeyOnUrl(cred, 'dev_own')).toBe(cred);
  });

  it('a fleet key on a phone it cannot see; DEL escaped, a plain id unchanged', () => {
    const fk = { account: { id: 'acc' } } as unknown as ResolvedFleetKey;
    const missing = fleetAccess(fk, long, undefined, null, undefined) as { code: string; message: string };
    expect(missing.code).toBe('device_not_found');
    expect(missing.message.length).toBeLessThan(150);
    expect(shown('\u007f'.repeat(2))).toBe('\\u007f\\u007f');
    expect(shown('dev_0123')).toBe('dev_0123');
  });
});
