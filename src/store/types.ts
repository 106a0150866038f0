// What the relay needs from its database. Two backends share this code: a Postgres URL
// or the embedded PGlite served on a Unix socket in the data dir
// (docs/decisions/0011-embedded-store-over-unix-socket.md).

import type { FleetStore } from './fleet-types.ts';
import type { HostedStore } from './hosted-types.ts';

export const SCOPES = ['devices:read', 'devices:act', 'devices:lease', 'runs:start'] as const;
export type Scope = (typeof SCOPES)[number];

/** The account every row belongs to when hosted mode is off. */
export const LOCAL_ACCOUNT_ID = 'local';

export interface Account {
  id: string;
  /** null = unlimited */
  maxDevices: number | null;
  maxKeys: number | null;
  /** A locked plan keeps pairings and tokens but /mcp answers 402. */
  locked: boolean;
  /** Sign-in address in hosted mode (lower case); null for the local account. */
  email: string | null;
  createdAt: Date;
}

export interface Device {
  id: string;
  accountId: string;
  name: string;
  /** base64 P-256 SPKI DER */
  publicKey: string;
  /** The phone's last initialize result (JSON), served to clients while it is offline. */
  initResult: unknown; // null when the phone never initialized
  lastSeenAt: Date | null;
  createdAt: Date;
}

/** The part of a device the accept path needs. */
export interface DeviceKey {
  accountId: string;
  /** base64 P-256 SPKI DER */
  publicKey: string;
}

/**
 * What is kept of a removed device, for REMOVED_DEVICE_RETENTION_MS: its key, so that its phone
 * coming back is told it was removed once its signature verifies, and when
 * (docs/decisions/0230-removed-devices-are-remembered.md).
 */
export interface RemovedDevice extends DeviceKey {
  removedAt: Date;
}

/** How long a removed device is remembered (purgeExpired drops older records): a year. */
export const REMOVED_DEVICE_RETENTION_MS = 365 * 24 * 3600_000;

export interface DeviceSeen {
  id: string;
  seenAt: Date;
  /** Present: store it as the phone's initialize result (null clears it); absent: keep what is stored. */
  initResult?: unknown;
}

export interface Token {
  id: string;
  accountId: string;
  deviceId: string;
  scopes: Scope[];
  via: 'key' | 'oauth';
  /**
   * The OAuth grant an access token was minted for (null for API keys). The phone knows an OAuth
   * caller by this id, which a refresh does not change (docs/decisions/0162-a-caller-is-its-grant.md).
   */
  grantId?: string | null;
  expiresAt: Date | null;
  createdAt: Date;
}

/**
 * `repeated`: the code was already used by this public key, whose device this is (its phone
 * asking again after a lost answer); nothing was created.
 */
export type RedeemResult =
  { ok: true; device: Device; repeated?: true } | { ok: false; error: 'bad_code' | 'limit_reached' };
export type CreateTokenResult = { ok: true; token: Token } | { ok: false; error: 'no_device' | 'limit_reached' };

export interface Store {
  /** Runs migrations if the schema is older; throws SchemaTooNewError if newer. */
  readonly schemaVersion: number;
  /** Labels, fleet keys, allocations and enrollment codes (src/store/fleet-types.ts). */
  readonly fleet: FleetStore;
  /** Hosted mode's sign-in codes, web sessions and OAuth data (src/store/hosted-types.ts). */
  readonly hosted: HostedStore;

  ensureAccount(id: string, limits?: { maxDevices?: number | null; maxKeys?: number | null }): Promise<Account>;
  getAccount(id: string): Promise<Account | undefined>;
  /** false when there is no such account (nothing journalled then). */
  setAccountLocked(id: string, locked: boolean): Promise<boolean>;
  listAccounts(): Promise<Account[]>;
  /** A new account with its own id; fails with email_taken when the address already has one. */
  createAccount(input: {
    id: string;
    email: string | null;
    maxDevices: number | null;
    maxKeys: number | null;
  }): Promise<{ ok: true; account: Account } | { ok: false; error: 'email_taken' }>;
  accountByEmail(email: string): Promise<Account | undefined>;
  /** Sets plan caps (null = unlimited); false when there is no such account. */
  setAccountPlan(id: string, plan: { maxDevices: number | null; maxKeys: number | null }): Promise<boolean>;

  /** Live API keys, fleet keys and OAuth grants of an account: what its key cap counts. */
  countCredentials(accountId: string): Promise<number>;

  /** Stores the hash of a new pairing code. Fails with limit_reached when the account is at its device cap. */
  createPairingCode(input: {
    accountId: string;
    codeHash: string;
    expiresAt: Date;
    name?: string | null;
  }): Promise<{ ok: true } | { ok: false; error: 'limit_reached' }>;
  /**
   * Atomically: finds an unused, unexpired code by hash, marks it used, checks the plan cap
   * again and inserts the device. Wrong, expired and used codes are all `bad_code`, except a
   * valid code this same public key already used (one-phone or enrollment): the device it
   * paired, again (`repeated`).
   */
  redeemPairingCode(input: {
    codeHash: string;
    deviceId: string;
    publicKey: string;
    name: string;
    now: Date;
  }): Promise<RedeemResult>;

  getDevice(id: string): Promise<Device | undefined>;
  listDevices(accountId?: string): Promise<Device[]>;
  /**
   * Deletes the device and every token bound to it, and remembers it as removed (getRemovedDevices).
   * false if it did not exist.
   */
  removeDevice(id: string): Promise<boolean>;
  saveDeviceInitResult(id: string, initResult: unknown, seenAt: Date): Promise<void>;
  touchDevice(id: string, seenAt: Date): Promise<void>;
  /** What a phone's signed upgrade is checked against, for many devices in one query; unknown ids are absent. */
  getDeviceKeys(ids: readonly string[]): Promise<Map<string, DeviceKey>>;
  /** The removed devices among `ids` (removed within REMOVED_DEVICE_RETENTION_MS), in one query; others are absent. */
  getRemovedDevices(ids: readonly string[]): Promise<Map<string, RemovedDevice>>;
  /**
   * Many phones' last-seen times (and, where given, initialize results) in one statement
   * (docs/decisions/0140-cheaper-device-accepts.md). Per device the latest time wins and
   * last_seen_at never moves back; unknown ids are ignored.
   */
  recordDevicesSeen(entries: readonly DeviceSeen[]): Promise<void>;

  /** Fails with no_device unless the device exists in the same account; limit_reached at the key cap. */
  createToken(input: {
    id: string;
    accountId: string;
    deviceId: string;
    hash: string;
    scopes: Scope[];
    via: 'key' | 'oauth';
    expiresAt?: Date | null;
  }): Promise<CreateTokenResult>;
  /** The token whose SHA-256 is `hash`, only while unexpired and its device exists in the same account. */
  findTokenByHash(hash: string, now: Date): Promise<Token | undefined>;
  listTokens(filter?: { accountId?: string; deviceId?: string }): Promise<Token[]>;
  revokeToken(id: string): Promise<boolean>;

  /**
   * The invalidation journal (written by removeDevice, revokeToken, setAccountLocked in the
   * same transaction). `afterId` null: start tailing from now.
   */
  controlEventsAfter(afterId: string | null, limit?: number): Promise<{ lastId: string; events: ControlEvent[] }>;
  /**
   * The journal without gaps, whatever order its transactions commit in
   * (docs/decisions/0163-a-journal-tail-without-gaps.md). `cursor` is opaque: null starts at
   * now; pass back the one returned. Each event is returned once per cursor chain.
   */
  tailControlEvents(cursor: string | null, limit?: number): Promise<{ cursor: string; events: ControlEvent[] }>;
  /**
   * A count that moves whenever the database may have changed, where this process sees every
   * change (the embedded database it serves: DatabaseSource.changeCount); absent elsewhere. The
   * journal's tail skips a read when it has not moved (src/gateway/node.ts).
   */
  readonly changeCount?: () => number;

  /**
   * Drops expired pairing codes (a used one stays until then: its phone may repeat the
   * pairing), expired tokens, hosted mode's expired or used codes,
   * sessions and refresh tokens (hosted-store.ts), journal rows older than an hour, and removed
   * devices' records older than REMOVED_DEVICE_RETENTION_MS. Returns how many codes, tokens,
   * sessions and refresh tokens went.
   */
  purgeExpired(now: Date): Promise<number>;
  close(): Promise<void>;
}

/** What must take effect on every node at once (docs/decisions/0003-announcements-reach-every-node.md). */
export type ControlEvent =
  | { type: 'device_removed'; deviceId: string }
  | { type: 'token_revoked'; tokenId: string }
  /**
   * A credential as the phone knows it (an API key's id, or an OAuth grant's id) is gone: the node
   * holding the phone's socket tells the phone (docs/decisions/0162-a-caller-is-its-grant.md).
   */
  | { type: 'credential_revoked'; credential: string; deviceId: string }
  /** The same for a credential used on many phones (a fleet key), in chunks. */
  | { type: 'credential_revoked'; credential: string; deviceIds: string[] }
  | { type: 'account_locked'; accountId: string; locked: boolean };

export class SchemaTooNewError extends Error {
  constructor(
    readonly found: number,
    readonly supported: number,
    /** The release the schema needs (schema_version.min_release); unknown when an older build migrated it. */
    readonly needs?: string,
  ) {
    super(
      `database schema version ${found} is newer than this relay supports (${supported}); ` +
        (needs ? `it needs phonebridge ${needs} or newer` : 'upgrade phonebridge'),
    );
  }
}
