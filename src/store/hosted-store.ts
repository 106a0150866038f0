// HostedStore on Kysely + pg (src/store/hosted-types.ts): hosted mode's sign-in codes, web sessions,
// OAuth clients, authorization codes, grants and refresh tokens. Built by the core store
// (kysely-store.ts) over its Kysely instance, as the fleet store is.
import { sql } from './kysely.ts';
import type { Kysely, Transaction } from 'kysely';
import type { DB } from './schema.ts';
import { atKeyCap, deviceOfAccountKeyShared, lockAccountCaps, toToken } from './credentials.ts';
import { journal } from './journal.ts';
import type {
  AuthorizationCode,
  HostedStore,
  OAuthClient,
  OAuthGrant,
  OAuthTokenPair,
  RefreshResult,
} from './hosted-types.ts';
import type { Scope, Token } from './types.ts';

export class KyselyHostedStore implements HostedStore {
  constructor(private readonly db: Kysely<DB>) {}

  async createSigninCode(input: {
    codeHash: string;
    email: string;
    nextPath: string | null;
    expiresAt: Date;
  }): Promise<void> {
    await this.db
      .insertInto('signin_codes')
      .values({ code_hash: input.codeHash, email: input.email, next_path: input.nextPath, expires_at: input.expiresAt })
      .execute();
  }

  async consumeSigninCode(
    codeHash: string,
    now: Date,
  ): Promise<{ email: string; nextPath: string | null } | undefined> {
    // One UPDATE: of two concurrent POSTs only one sees used_at still null.
    const r = await this.db
      .updateTable('signin_codes')
      .set({ used_at: now })
      .where('code_hash', '=', codeHash)
      .where('used_at', 'is', null)
      .where('expires_at', '>', now)
      .returning(['email', 'next_path'])
      .executeTakeFirst();
    return r && { email: r.email, nextPath: r.next_path };
  }

  async peekSigninCode(codeHash: string, now: Date): Promise<{ email: string } | undefined> {
    const r = await this.db
      .selectFrom('signin_codes')
      .select('email')
      .where('code_hash', '=', codeHash)
      .where('used_at', 'is', null)
      .where('expires_at', '>', now)
      .executeTakeFirst();
    return r && { email: r.email };
  }

  async createWebSession(input: { tokenHash: string; accountId: string; expiresAt: Date }): Promise<void> {
    await this.db
      .insertInto('web_sessions')
      .values({ token_hash: input.tokenHash, account_id: input.accountId, expires_at: input.expiresAt })
      .execute();
  }

  async findWebSession(tokenHash: string, now: Date): Promise<{ accountId: string; expiresAt: Date } | undefined> {
    const r = await this.db
      .selectFrom('web_sessions')
      .select(['account_id', 'expires_at'])
      .where('token_hash', '=', tokenHash)
      .where('expires_at', '>', now)
      .executeTakeFirst();
    return r && { accountId: r.account_id, expiresAt: r.expires_at };
  }

  async deleteWebSession(tokenHash: string): Promise<void> {
    await this.db.deleteFrom('web_sessions').where('token_hash', '=', tokenHash).execute();
  }

  async registerOAuthClient(input: { id: string; name: string; redirectUris: string[] }): Promise<OAuthClient> {
    const r = await this.db
      .insertInto('oauth_clients')
      .values({ id: input.id, name: input.name, redirect_uris: [...input.redirectUris] })
      .returningAll()
      .executeTakeFirstOrThrow();
    return { id: r.id, name: r.name, redirectUris: r.redirect_uris, createdAt: r.created_at };
  }

  async putMetadataClient(input: { id: string; name: string; redirectUris: string[] }): Promise<OAuthClient> {
    const r = await this.db
      .insertInto('oauth_clients')
      .values({ id: input.id, name: input.name, redirect_uris: [...input.redirectUris] })
      .onConflict((oc) => oc.column('id').doUpdateSet({ name: input.name, redirect_uris: [...input.redirectUris] }))
      .returningAll()
      .executeTakeFirstOrThrow();
    return { id: r.id, name: r.name, redirectUris: r.redirect_uris, createdAt: r.created_at };
  }

  async getOAuthClient(id: string): Promise<OAuthClient | undefined> {
    const r = await this.db.selectFrom('oauth_clients').selectAll().where('id', '=', id).executeTakeFirst();
    return r && { id: r.id, name: r.name, redirectUris: r.redirect_uris, createdAt: r.created_at };
  }

  async createAuthorizationCode(input: AuthorizationCode & { codeHash: string; expiresAt: Date }): Promise<void> {
    await this.db
      .insertInto('oauth_codes')
      .values({
        code_hash: input.codeHash,
        client_id: input.clientId,
        redirect_uri: input.redirectUri,
        code_challenge: input.codeChallenge,
        resource: input.resource,
        account_id: input.accountId,
        device_id: input.deviceId,
        scopes: [...input.scopes],
        expires_at: input.expiresAt,
      })
      .execute();
  }

  async consumeAuthorizationCode(codeHash: string, now: Date): Promise<AuthorizationCode | undefined> {
    const r = await this.db
      .updateTable('oauth_codes')
      .set({ used_at: now })
      .where('code_hash', '=', codeHash)
      .where('used_at', 'is', null)
      .where('expires_at', '>', now)
      .returningAll()
      .executeTakeFirst();
    return (
      r && {
        clientId: r.client_id,
        redirectUri: r.redirect_uri,
        codeChallenge: r.code_challenge,
        resource: r.resource,
        accountId: r.account_id,
        deviceId: r.device_id,
        scopes: r.scopes as Scope[],
      }
    );
  }

  async issueOAuthGrant(
    input: { grantId: string; accountId: string; clientId: string; deviceId: string; scopes: Scope[] } & OAuthTokenPair,
  ): Promise<{ ok: true; token: Token } | { ok: false; error: 'no_device' | 'limit_reached' }> {
    return this.db.transaction().execute(async (trx) => {
      // The same lock as createToken: keys and grants share the cap, counted under it.
      const account = await lockAccountCaps(trx, input.accountId);
      const device = await deviceOfAccountKeyShared(trx, input.deviceId, input.accountId);
      if (!account || !device) return { ok: false as const, error: 'no_device' as const };
      if (await atKeyCap(trx, input.accountId, account.max_keys))
        return { ok: false as const, error: 'limit_reached' as const };
      await trx
        .insertInto('oauth_grants')
        .values({
          id: input.grantId,
          account_id: input.accountId,
          client_id: input.clientId,
          device_id: input.deviceId,
          scopes: [...input.scopes],
        })
        .execute();
      const token = await mintPair(trx, input.grantId, input.accountId, input.deviceId, input.scopes, input);
      return { ok: true as const, token };
    });
  }

  async refreshOAuthGrant(
    input: { refreshHash: string; clientId: string; now: Date; scopes?: Scope[]; refused?: boolean } & OAuthTokenPair,
  ): Promise<RefreshResult> {
    return this.db.transaction().execute(async (trx): Promise<RefreshResult> => {
      // FOR UPDATE: two concurrent uses of one refresh token cannot both rotate it.
      const rt = await trx
        .selectFrom('oauth_refresh_tokens')
        .innerJoin('oauth_grants', 'oauth_grants.id', 'oauth_refresh_tokens.grant_id')
        .select([
          'oauth_refresh_tokens.grant_id',
          'oauth_refresh_tokens.expires_at',
          'oauth_refresh_tokens.used_at',
          'oauth_grants.client_id',
          'oauth_grants.account_id',
          'oauth_grants.device_id',
          'oauth_grants.scopes',
        ])
        .where('oauth_refresh_tokens.token_hash', '=', input.refreshHash)
        .forUpdate()
        .executeTakeFirst();
      if (!rt) return { ok: false, error: 'invalid' };
      if (rt.used_at !== null) {
        // A rotated token came back: someone holds a copy. End the whole grant, whichever
        // client id it came under (a thief need not present the grant's own).
        await deleteGrant(trx, rt.grant_id);
        return { ok: false, error: 'reused' };
      }
      if (rt.client_id !== input.clientId) return { ok: false, error: 'invalid' };
      if (input.refused) return { ok: false, error: 'refused' };
      if (rt.expires_at.getTime() <= input.now.getTime()) return { ok: false, error: 'invalid' };
      const granted = rt.scopes as Scope[];
      // Checked before the rotation: a refused request leaves the refresh token usable.
      if (input.scopes?.some((s) => !granted.includes(s))) return { ok: false, error: 'scope', granted };
      await trx
        .updateTable('oauth_refresh_tokens')
        .set({ used_at: input.now })
        .where('token_hash', '=', input.refreshHash)
        .execute();
      const scopes = input.scopes?.length ? input.scopes : granted;
      const token = await mintPair(trx, rt.grant_id, rt.account_id, rt.device_id, scopes, input);
      return { ok: true, token, grantId: rt.grant_id };
    });
  }

  async listOAuthGrants(accountId: string): Promise<OAuthGrant[]> {
    const rows = await this.db
      .selectFrom('oauth_grants')
      .innerJoin('oauth_clients', 'oauth_clients.id', 'oauth_grants.client_id')
      .selectAll('oauth_grants')
      .select('oauth_clients.name as client_name')
      .select('oauth_clients.redirect_uris as redirect_uris')
      // The grant's own record of its last mint, which outlives the token (the purge deletes it
      // an hour later); the newest token still there covers grants last minted before migration
      // 009 or by a node of the release before it, which does not write the column.
      .select((eb) =>
        sql<Date | null>`greatest(${eb.ref('oauth_grants.last_token_at')}, ${eb
          .selectFrom('tokens')
          .select((t) => t.fn.max('tokens.created_at').as('m'))
          .whereRef('tokens.grant_id', '=', 'oauth_grants.id')})`.as('last_used_at'),
      )
      .where('oauth_grants.account_id', '=', accountId)
      .orderBy('oauth_grants.created_at')
      .orderBy('oauth_grants.id')
      .execute();
    return rows.map((r) => ({
      id: r.id,
      accountId: r.account_id,
      clientId: r.client_id,
      clientName: r.client_name,
      deviceId: r.device_id,
      scopes: r.scopes as Scope[],
      createdAt: r.created_at,
      redirectUris: r.redirect_uris,
      lastUsedAt: r.last_used_at ?? null,
    }));
  }

  async revokeOAuthGrant(id: string): Promise<boolean> {
    return this.db.transaction().execute((trx) => deleteGrant(trx, id));
  }
}

/**
 * Part of Store.purgeExpired, in its transaction: expired or used sign-in and authorization
 * codes, expired web sessions and refresh tokens. Returns how many rows went.
 */
export async function purgeHostedExpired(trx: Transaction<DB>, now: Date): Promise<number> {
  // Rotated refresh tokens stay until they expire: their reuse must still revoke the grant.
  const rows = await Promise.all([
    trx
      .deleteFrom('signin_codes')
      .where((eb) => eb.or([eb('expires_at', '<=', now), eb('used_at', 'is not', null)]))
      .executeTakeFirst(),
    trx
      .deleteFrom('oauth_codes')
      .where((eb) => eb.or([eb('expires_at', '<=', now), eb('used_at', 'is not', null)]))
      .executeTakeFirst(),
    trx.deleteFrom('web_sessions').where('expires_at', '<=', now).executeTakeFirst(),
    trx.deleteFrom('oauth_refresh_tokens').where('expires_at', '<=', now).executeTakeFirst(),
  ]);
  return Number(rows.reduce((n, r) => n + r.numDeletedRows, 0n));
}

/**
 * A new access token and refresh token for a grant, inside the caller's transaction; the grant
 * records the token's mint time (its "last token" on the dashboard, kept after the token is purged).
 */
async function mintPair(
  trx: Transaction<DB>,
  grantId: string,
  accountId: string,
  deviceId: string,
  scopes: Scope[],
  pair: OAuthTokenPair,
): Promise<Token> {
  const row = await trx
    .insertInto('tokens')
    .values({
      id: pair.access.id,
      account_id: accountId,
      device_id: deviceId,
      hash: pair.access.hash,
      scopes: [...scopes],
      via: 'oauth',
      grant_id: grantId,
      expires_at: pair.access.expiresAt,
    })
    .returningAll()
    .executeTakeFirstOrThrow();
  await trx.updateTable('oauth_grants').set({ last_token_at: row.created_at }).where('id', '=', grantId).execute();
  await trx
    .insertInto('oauth_refresh_tokens')
    .values({ token_hash: pair.refresh.hash, grant_id: grantId, expires_at: pair.refresh.expiresAt })
    .execute();
  return toToken(row);
}

/** Deletes a grant with its tokens; every access token is journalled so every node forgets it. */
async function deleteGrant(trx: Transaction<DB>, grantId: string): Promise<boolean> {
  const tokens = await trx.deleteFrom('tokens').where('grant_id', '=', grantId).returning('id').execute();
  const r = await trx.deleteFrom('oauth_grants').where('id', '=', grantId).returning('device_id').executeTakeFirst();
  for (const t of tokens) await journal(trx, { type: 'token_revoked', tokenId: t.id });
  if (r) await journal(trx, { type: 'credential_revoked', credential: grantId, deviceId: r.device_id });
  return !!r;
}
