// Enrollment codes (docs/decisions/0173-enrollment.md): one code pairs up to N phones through
// the ordinary /pair, each named <prefix><counter> and labelled. Shown once; stored hashed.
import { hashPairingCode, newId, newPairingCode } from '../crypto/secrets.ts';
import type { Enrollment, Store } from '../store/index.ts';
import { LabelError, validateLabels, type Labels } from './labels.ts';

export const MAX_ENROLL_PHONES = 100_000;
const PREFIX = /^[A-Za-z0-9][-A-Za-z0-9_.]{0,39}$/;

/** `7d`, `12h`, `30m`, `90s` → milliseconds. */
export function parseDuration(raw: string): number {
  const m = /^(\d+)\s*([smhd])$/.exec(raw.trim());
  if (!m) throw new LabelError(`"${raw}": expected a duration such as 7d, 12h, 30m or 90s`);
  const n = Number(m[1]) * { s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 }[m[2] as 's' | 'm' | 'h' | 'd'];
  if (n <= 0 || n > 365 * 86_400_000) throw new LabelError(`"${raw}": between 1s and 365d`);
  return n;
}

export interface EnrollmentQr {
  v: 1;
  relay: string;
  code: string;
  fp?: string;
}

export async function createEnrollment(
  store: Store,
  opts: {
    accountId: string;
    maxPhones: number;
    expiresMs: number;
    labels?: Labels;
    namePrefix?: string | null;
    relay: string;
    fp?: string;
    now?: Date;
  },
): Promise<{ id: string; code: string; qr: EnrollmentQr; enrollment: Enrollment }> {
  if (!Number.isInteger(opts.maxPhones) || opts.maxPhones < 1 || opts.maxPhones > MAX_ENROLL_PHONES)
    throw new LabelError(`max phones must be an integer from 1 to ${MAX_ENROLL_PHONES}`);
  const prefix = opts.namePrefix ?? null;
  if (prefix !== null && !PREFIX.test(prefix))
    throw new LabelError('name prefix: 1–40 characters of [A-Za-z0-9-_.], starting alphanumeric');
  const labels = validateLabels({ ...(opts.labels ?? {}) });
  const code = newPairingCode();
  const now = opts.now ?? new Date();
  const enrollment = await store.fleet.createEnrollment({
    id: newId('enr'),
    accountId: opts.accountId,
    codeHash: hashPairingCode(code),
    maxPhones: opts.maxPhones,
    labels,
    namePrefix: prefix,
    expiresAt: new Date(now.getTime() + opts.expiresMs),
  });
  const qr: EnrollmentQr = { v: 1, relay: opts.relay, code, ...(opts.fp ? { fp: opts.fp } : {}) };
  return { id: enrollment.id, code, qr, enrollment };
}

export function enrollmentJson(e: Enrollment, now = new Date()) {
  return {
    id: e.id,
    account_id: e.accountId,
    max_phones: e.maxPhones,
    used: e.used,
    labels: e.labels,
    name_prefix: e.namePrefix,
    expires_at: e.expiresAt.toISOString(),
    state: e.revokedAt ? 'revoked' : e.expiresAt <= now ? 'expired' : e.used >= e.maxPhones ? 'used_up' : 'active',
  };
}
