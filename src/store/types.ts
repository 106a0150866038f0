// What the relay needs from its database. Two backends share this code: a Postgres URL
// or the embedded PGlite served on a Unix socket in the data dir
// (docs/decisions/0011-embedded-store-over-unix-socket.md).

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

export interface Token {
  id: string;
  accountId: string;
  deviceId: string;
  scopes: Scope[];
  via: 'key' | 'oauth';
  expiresAt: Date | null;
  createdAt: Date;
}

export type RedeemResult = { ok: true; device: Device } | { ok: false; error: 'bad_code' | 'limit_reached' };
export type CreateTokenResult = { ok: true; token: Token } | { ok: false; error: 'no_device' | 'limit_reached' };

export interface Store {
  /** Runs migrations if the schema is older; throws SchemaTooNewError if newer. */
  readonly schemaVersion: number;

  ensureAccount(id: string, limits?: { maxDevices?: number | null; maxKeys?: number | null }): Promise<Account>;
  getAccount(id: string): Promise<Account | undefined>;
  setAccountLocked(id: string, locked: boolean): Promise<void>;

  /** Stores the hash of a new pairing code. Fails with limit_reached when the account is at its device cap. */
  createPairingCode(input: {
    accountId: string;
    codeHash: string;
    expiresAt: Date;
    name?: string | null;
  }): Promise<{ ok: true } | { ok: false; error: 'limit_reached' }>;
  /**
   * Atomically: finds an unused, unexpired code by hash, marks it used, checks the plan cap
   * again and inserts the device. Wrong, expired and used codes are all `bad_code`.
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
  /** Deletes the device and every token bound to it. false if it did not exist. */
  removeDevice(id: string): Promise<boolean>;
  saveDeviceInitResult(id: string, initResult: unknown, seenAt: Date): Promise<void>;
  touchDevice(id: string, seenAt: Date): Promise<void>;

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

  /** Drops expired or used pairing codes and expired tokens. Returns how many rows went. */
  purgeExpired(now: Date): Promise<number>;
  close(): Promise<void>;
}

/** What must take effect on every node at once (docs/decisions/0003-announcements-reach-every-node.md). */
export type ControlEvent =
  | { type: 'device_removed'; deviceId: string }
  | { type: 'token_revoked'; tokenId: string }
  | { type: 'account_locked'; accountId: string; locked: boolean };

export class SchemaTooNewError extends Error {
  constructor(
    readonly found: number,
    readonly supported: number,
  ) {
    super(`database schema version ${found} is newer than this relay supports (${supported}); upgrade phonebridge`);
  }
}
