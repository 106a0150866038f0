// What the fleet feature (src/fleet/) needs from the database: labels, fleet keys, allocations,
// enrollment codes (docs/decisions/0170-fleet-model.md). Label and selector syntax is checked by
// the caller (src/fleet/labels.ts); this layer stores what it is given.
import type { Device, Scope } from './types.ts';

export interface LabelledDevice extends Device {
  /** Hand-set labels (the phone's facts are derived from initResult by src/fleet/labels.ts). */
  labels: Record<string, string>;
}

/**
 * What selectors read of a phone: its hand-set labels and, as `initResult`, only the parts of
 * its cached initialize result its facts come from (src/fleet/labels.ts factLabels) — not the
 * whole result, which the allocation and per-call paths would otherwise parse for every row.
 */
export interface DeviceLabels {
  id: string;
  accountId: string;
  labels: Record<string, string>;
  initResult: unknown;
}

/**
 * A requirement on a hand-set label, as a selector has it (src/fleet/labels.ts Requirement) and
 * as freeDevices checks it in SQL, with the same meaning: `neq` and `notin` also hold for a phone
 * without the label.
 */
export type LabelRequirement =
  | { key: string; op: 'eq' | 'neq'; value: string }
  | { key: string; op: 'in' | 'notin'; values: readonly string[] }
  | { key: string; op: 'exists' | 'absent' };

export interface FleetKey {
  id: string;
  accountId: string;
  scopes: Scope[];
  /** Canonical selector text; '' reaches every phone of the account. */
  selector: string;
  createdAt: Date;
}

export interface Allocation {
  id: string;
  deviceId: string;
  accountId: string;
  keyId: string;
  expiresAt: Date;
  /** When its current term began: the allocation, or its latest renewal (a renewal's default length is expiresAt - createdAt). */
  createdAt: Date;
}

export interface Enrollment {
  id: string;
  accountId: string;
  maxPhones: number;
  used: number;
  labels: Record<string, string>;
  namePrefix: string | null;
  expiresAt: Date;
  revokedAt: Date | null;
  createdAt: Date;
}

export interface FleetStore {
  /**
   * Sets and removes hand-set labels: the labels after the change; `no_device` when there is no
   * such device (in the account); `too_many` (nothing changed) when the change would leave more
   * than `change.max` labels and more than the phone has now.
   */
  updateLabels(
    deviceId: string,
    change: { set: Record<string, string>; remove: string[]; max?: number },
    accountId?: string,
  ): Promise<
    { ok: true; labels: Record<string, string> } | { ok: false; error: 'no_device' | 'too_many'; count?: number }
  >;
  getDevice(id: string): Promise<LabelledDevice | undefined>;
  /**
   * Devices by id order, after `afterId`, whose labels contain every pair of `contains` (the
   * equality part of a selector, checked in SQL; the rest is the caller's).
   */
  listDevices(filter: {
    accountId?: string;
    contains?: Record<string, string>;
    afterId?: string;
    limit?: number;
  }): Promise<LabelledDevice[]>;

  /** Fails with limit_reached at the account's key cap (device keys and fleet keys count together). */
  createKey(input: {
    id: string;
    accountId: string;
    hash: string;
    scopes: Scope[];
    selector: string;
  }): Promise<{ ok: true; key: FleetKey } | { ok: false; error: 'limit_reached' | 'no_account' }>;
  findKeyByHash(hash: string): Promise<FleetKey | undefined>;
  getKey(id: string): Promise<FleetKey | undefined>;
  listKeys(accountId?: string): Promise<FleetKey[]>;
  /**
   * Remembers that the key was used on the phone (idempotent), so its revocation reaches it.
   * allocate() records its phone itself.
   */
  recordKeyUse(keyId: string, deviceId: string): Promise<void>;
  /**
   * Deletes the key and its allocations; journals token_revoked so every node ends what it
   * holds, and credential_revoked for the phones it was used on (they release what it held).
   */
  revokeKey(id: string): Promise<boolean>;

  /**
   * Hands `deviceId` to `keyId` unless someone holds an unexpired allocation of it: one
   * conditional upsert on the device's unique row (docs/decisions/0171-allocation-atomicity.md).
   * The allocation, or undefined when the phone is taken (or gone).
   */
  allocate(input: {
    id: string;
    deviceId: string;
    accountId: string;
    keyId: string;
    expiresAt: Date;
    now: Date;
  }): Promise<Allocation | undefined>;
  /**
   * Up to `limit` of the account's phones whose hand-set labels meet every requirement of
   * `labels` and that nobody holds an unexpired allocation of: the candidates of an allocation.
   * Without `range` in random order; with it in id order, ids strictly after `after` and before
   * `before` (either bound may be left out): one keyset page (src/fleet/allocations.ts).
   */
  freeDevices(
    accountId: string,
    labels: readonly LabelRequirement[],
    now: Date,
    limit: number,
    range?: { after?: string; before?: string },
  ): Promise<DeviceLabels[]>;
  /** A phone's labels and facts with the id of its unexpired allocation, in one read (the per-call access check). */
  deviceAccess(
    deviceId: string,
    now: Date,
  ): Promise<{ device: DeviceLabels; allocation: { id: string; keyId: string } | null } | undefined>;
  /** The unexpired allocation of a phone. */
  allocationOfDevice(deviceId: string, now: Date): Promise<Allocation | undefined>;
  getAllocation(id: string, now: Date): Promise<Allocation | undefined>;
  /** Device ids of the account's unexpired allocations. */
  allocatedDevices(accountId: string, now: Date): Promise<Set<string>>;
  listAllocations(filter: { accountId?: string; keyId?: string }, now: Date): Promise<Allocation[]>;
  /** New expiry for the holder's unexpired allocation, its term starting `now`; undefined when it is not (or no longer) theirs. */
  renewAllocation(id: string, keyId: string, expiresAt: Date, now: Date): Promise<Allocation | undefined>;
  /**
   * Ends a live allocation of the key; false when there is none (released, expired, taken over
   * or never made: all alike, docs/decisions/0214-an-ended-allocation-is-not-found.md).
   */
  releaseAllocation(id: string, keyId: string, now: Date): Promise<boolean>;
  /** When the account's next unexpired allocation expires (a waiting allocation wakes then). */
  nextAllocationExpiry(accountId: string, now: Date): Promise<Date | undefined>;
  /** Unexpired allocations (a gauge). */
  countAllocations(now: Date): Promise<number>;

  createEnrollment(input: {
    id: string;
    accountId: string;
    codeHash: string;
    maxPhones: number;
    labels: Record<string, string>;
    namePrefix: string | null;
    expiresAt: Date;
  }): Promise<Enrollment>;
  listEnrollments(accountId?: string): Promise<Enrollment[]>;
  getEnrollment(id: string): Promise<Enrollment | undefined>;
  /** Its code stops working at once; phones it paired stay. */
  revokeEnrollment(id: string, now: Date): Promise<boolean>;
}
