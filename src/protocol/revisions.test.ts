import { describe, expect, it } from 'vitest';
import { getOrDeleteEra, isStatelessRevision } from './revisions.ts';

describe('getOrDeleteEra', () => {
  it('serves the session revisions, and no version, as the session era', () => {
    for (const v of [undefined, '', '2025-11-25', '2025-06-18', '2025-03-26']) {
      expect(getOrDeleteEra('s', v)).toBe('session');
      expect(getOrDeleteEra(undefined, v)).toBe('session');
    }
  });
  it('takes 2026-07-28 as the stateless revision (405), with a session id or without', () => {
    expect(getOrDeleteEra('s', '2026-07-28')).toBe('stateless');
    expect(getOrDeleteEra(undefined, '2026-07-28')).toBe('stateless');
  });
  it('refuses another version with a session id (400), and takes it as stateless without one (405)', () => {
    expect(getOrDeleteEra('s', '1900-01-01')).toBe('unsupported-version');
    expect(getOrDeleteEra('s', '2025-11-25, 2025-11-25')).toBe('unsupported-version');
    expect(getOrDeleteEra(undefined, '1900-01-01')).toBe('stateless');
  });
});

describe('isStatelessRevision', () => {
  it('is 2026-07-28 only', () => {
    expect(['2026-07-28', '2025-11-25', '1900-01-01', undefined].map(isStatelessRevision)).toEqual([
      true,
      false,
      false,
      false,
    ]);
  });
});
