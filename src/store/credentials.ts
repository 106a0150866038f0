// Tokens as rows, and what a new credential is checked against (its device, the key cap): shared
// by the core store (API keys), the fleet store (fleet keys) and the hosted store (OAuth grants),
// which all count against one key cap.
import type { Kysely, Selectable, Transaction } from 'kysely';
import type { DB, TokensTable } from './schema.ts';
import type { Scope, Token } from './types.ts';

export function toToken(r: Selectable<TokensTable>): Token {
  return {
    id: r.id,
    accountId: r.account_id,
    deviceId: r.device_id,
    scopes: r.scopes as Scope[],
    via: r.via,
    grantId: r.grant_id,
    expiresAt: r.expires_at,
    createdAt: r.created_at,
  };
}

/**
 * The device, if it belongs to the account, locked FOR KEY SHARE: it cannot be removed until
 * the transaction ends, so a token minted for it never outlives it.
 */
export function deviceOfAccountKeyShared(
  trx: Transaction<DB>,
  deviceId: string,
  accountId: string,
): Promise<{ id: string } | undefined> {
  return trx
    .selectFrom('devices')
    .select('id')
    .where('id', '=', deviceId)
    .where('account_id', '=', accountId)
    .forKeyShare()
    .executeTakeFirst();
}

/**
 * The standing credentials of an account that count against its plan's key cap: API keys,
 * fleet keys (docs/decisions/0170-fleet-model.md) and OAuth grants
 * (docs/decisions/0164-grants-count-against-the-key-cap.md). OAuth access tokens are minted on
 * every refresh, so they are not counted; their grant is.
 */
export async function credentialsInUse(db: Kysely<DB>, accountId: string): Promise<number> {
  const now = new Date();
  const [t, f, g] = await Promise.all([
    db
      .selectFrom('tokens')
      .select((eb) => eb.fn.countAll<string>().as('n'))
      .where('account_id', '=', accountId)
      .where('via', '=', 'key')
      .where((eb) => eb.or([eb('expires_at', 'is', null), eb('expires_at', '>', now)]))
      .executeTakeFirstOrThrow(),
    db
      .selectFrom('fleet_keys')
      .select((eb) => eb.fn.countAll<string>().as('n'))
      .where('account_id', '=', accountId)
      .executeTakeFirstOrThrow(),
    db
      .selectFrom('oauth_grants')
      .select((eb) => eb.fn.countAll<string>().as('n'))
      .where('account_id', '=', accountId)
      .executeTakeFirstOrThrow(),
  ]);
  return Number(t.n) + Number(f.n) + Number(g.n);
}

/**
 * The account's plan caps, its row locked FOR NO KEY UPDATE until the transaction ends: every
 * creation that a cap limits (API keys, fleet keys, OAuth grants; phones) takes this lock first,
 * so two concurrent ones cannot both take the last slot. Undefined when there is no such account.
 */
export function lockAccountCaps(
  trx: Transaction<DB>,
  accountId: string,
): Promise<{ max_keys: number | null; max_devices: number | null } | undefined> {
  return trx
    .selectFrom('accounts')
    .select(['max_keys', 'max_devices'])
    .where('id', '=', accountId)
    .forNoKeyUpdate()
    .executeTakeFirst();
}

/** Whether the account's standing credentials have reached its key cap (null: no cap). Under lockAccountCaps. */
export async function atKeyCap(trx: Transaction<DB>, accountId: string, maxKeys: number | null): Promise<boolean> {
  return maxKeys !== null && (await credentialsInUse(trx, accountId)) >= maxKeys;
}
