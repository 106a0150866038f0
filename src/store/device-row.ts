// A devices row as the store's Device: shared by the core store and the fleet store (which adds labels).
import type { Selectable } from 'kysely';
import type { DevicesTable } from './schema.ts';
import type { Device } from './types.ts';

export function toDevice(r: Selectable<DevicesTable>): Device {
  return {
    id: r.id,
    accountId: r.account_id,
    name: r.name,
    publicKey: r.public_key,
    initResult: r.init_result ?? null,
    lastSeenAt: r.last_seen_at,
    createdAt: r.created_at,
  };
}
