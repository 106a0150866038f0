// Row types of the tables as Kysely sees them (snake_case, as in the migrations).
import type { ColumnType, Generated } from 'kysely';

/** timestamptz: pg returns a Date; we always write Dates. */
type Timestamp = ColumnType<Date, Date, Date>;

export interface AccountsTable {
  id: string;
  max_devices: number | null;
  max_keys: number | null;
  locked: Generated<boolean>;
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
  created_at: ColumnType<Date, Date | undefined, never>;
}

export interface TokensTable {
  id: string;
  account_id: string;
  device_id: string;
  /** SHA-256 of the token (hex); the token itself is never stored. */
  hash: string;
  scopes: ColumnType<string[], string[], string[]>;
  via: 'key' | 'oauth';
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

export interface DB {
  accounts: AccountsTable;
  devices: DevicesTable;
  tokens: TokensTable;
  pairing_codes: PairingCodesTable;
  schema_version: SchemaVersionTable;
  control_events: ControlEventsTable;
}
