// Row types of the tables as Kysely sees them (snake_case, as in the migrations).
import type { ColumnType, Generated } from 'kysely';

/** timestamptz: pg returns a Date; we always write Dates. */
type Timestamp = ColumnType<Date, Date, Date>;

export interface AccountsTable {
  id: string;
  max_devices: number | null;
  max_keys: number | null;
  locked: Generated<boolean>;
  /** Lower-cased; null for the local account and accounts made without one. */
  email: ColumnType<string | null, string | null | undefined, string | null>;
  created_at: ColumnType<Date, Date | undefined, never>;
}

export interface DevicesTable {
  id: string;
  account_id: string;
  name: string;
  public_key: string;
  /** jsonb: pg parses it on read; we write JSON text so arrays are not mistaken for Postgres arrays. */
  init_result: ColumnType<unknown, string | null | undefined, string | null>;
  last_seen_at: ColumnType<Date | null, Date | null | undefined, Date | null>;
  /** jsonb object of hand-set labels (migration 004); written as JSON text. */
  labels: ColumnType<Record<string, string>, string | undefined, string>;
  /** The enrollment code that paired it, if one did (migration 007). */
  enrollment_id: ColumnType<string | null, string | null | undefined, never>;
  created_at: ColumnType<Date, Date | undefined, never>;
}

/** What is kept of a removed device (migration 006, docs/decisions/0230-removed-devices-are-remembered.md). */
export interface RemovedDevicesTable {
  id: string;
  account_id: string;
  /** base64 P-256 SPKI DER, as devices.public_key: what a returning phone's signature is checked against. */
  public_key: string;
  removed_at: ColumnType<Date, Date | undefined, Date>;
}

export interface TokensTable {
  id: string;
  account_id: string;
  device_id: string;
  /** SHA-256 of the token (hex); the token itself is never stored. */
  hash: string;
  scopes: ColumnType<string[], string[], string[]>;
  via: 'key' | 'oauth';
  /** The OAuth grant an access token was minted for (null for API keys). */
  grant_id: ColumnType<string | null, string | null | undefined, never>;
  expires_at: ColumnType<Date | null, Date | null | undefined, Date | null>;
  created_at: ColumnType<Date, Date | undefined, never>;
}

export interface PairingCodesTable {
  /** Hash of the normalised code; the code itself is never stored. */
  code_hash: string;
  account_id: string;
  name: string | null;
  expires_at: Timestamp;
  used_at: ColumnType<Date | null, Date | null | undefined, Date | null>;
  created_at: ColumnType<Date, Date | undefined, never>;
}

export interface ControlEventsTable {
  id: Generated<string>;
  /** jsonb, written as JSON text. */
  event: ColumnType<unknown, string, never>;
  created_at: ColumnType<Date, Date | undefined, never>;
}

export interface SchemaVersionTable {
  /** Always true: the primary key that keeps this table to one row. */
  singleton: Generated<boolean>;
  version: number;
  updated_at: ColumnType<Date, Date | undefined, Date>;
}

export interface SigninCodesTable {
  code_hash: string;
  email: string;
  next_path: string | null;
  expires_at: Timestamp;
  used_at: ColumnType<Date | null, Date | null | undefined, Date | null>;
  created_at: ColumnType<Date, Date | undefined, never>;
}

export interface WebSessionsTable {
  /** SHA-256 of the cookie value. */
  token_hash: string;
  account_id: string;
  expires_at: Timestamp;
  created_at: ColumnType<Date, Date | undefined, never>;
}

export interface OAuthClientsTable {
  id: string;
  name: string;
  redirect_uris: ColumnType<string[], string[], string[]>;
  created_at: ColumnType<Date, Date | undefined, never>;
}

export interface OAuthGrantsTable {
  id: string;
  account_id: string;
  client_id: string;
  device_id: string;
  scopes: ColumnType<string[], string[], string[]>;
  created_at: ColumnType<Date, Date | undefined, never>;
  /** When it last minted an access token (migration 009; null on grants minted only before it). */
  last_token_at: ColumnType<Date | null, Date | null | undefined, Date | null>;
}

export interface OAuthCodesTable {
  code_hash: string;
  client_id: string;
  redirect_uri: string;
  code_challenge: string;
  resource: string;
  account_id: string;
  device_id: string;
  scopes: ColumnType<string[], string[], string[]>;
  expires_at: Timestamp;
  used_at: ColumnType<Date | null, Date | null | undefined, Date | null>;
  created_at: ColumnType<Date, Date | undefined, never>;
}

export interface OAuthRefreshTokensTable {
  token_hash: string;
  grant_id: string;
  expires_at: Timestamp;
  used_at: ColumnType<Date | null, Date | null | undefined, Date | null>;
  created_at: ColumnType<Date, Date | undefined, never>;
}

export interface FleetKeysTable {
  id: string;
  account_id: string;
  /** SHA-256 of the key (hex). */
  hash: string;
  scopes: ColumnType<string[], string[], string[]>;
  selector: string;
  created_at: ColumnType<Date, Date | undefined, never>;
}

export interface AllocationsTable {
  id: string;
  device_id: string;
  account_id: string;
  key_id: string;
  expires_at: Timestamp;
  created_at: ColumnType<Date, Date | undefined, Date>;
}

/** The phones a fleet key was used on (migration 005). */
export interface FleetKeyDevicesTable {
  key_id: string;
  device_id: string;
}

export interface EnrollmentsTable {
  id: string;
  account_id: string;
  /** Hash of the normalised code, like pairing_codes. */
  code_hash: string;
  max_phones: number;
  used: Generated<number>;
  labels: ColumnType<Record<string, string>, string | undefined, string>;
  name_prefix: string | null;
  expires_at: Timestamp;
  revoked_at: ColumnType<Date | null, Date | null | undefined, Date | null>;
  created_at: ColumnType<Date, Date | undefined, never>;
}

export interface DB {
  accounts: AccountsTable;
  devices: DevicesTable;
  removed_devices: RemovedDevicesTable;
  tokens: TokensTable;
  pairing_codes: PairingCodesTable;
  schema_version: SchemaVersionTable;
  control_events: ControlEventsTable;
  signin_codes: SigninCodesTable;
  web_sessions: WebSessionsTable;
  oauth_clients: OAuthClientsTable;
  oauth_grants: OAuthGrantsTable;
  oauth_codes: OAuthCodesTable;
  oauth_refresh_tokens: OAuthRefreshTokensTable;
  fleet_keys: FleetKeysTable;
  allocations: AllocationsTable;
  enrollments: EnrollmentsTable;
  fleet_key_devices: FleetKeyDevicesTable;
}
