// What hosted mode (src/hosted/) needs from the database: sign-in codes, web sessions, and the
// OAuth authorization server's clients, codes, grants and refresh tokens (migration
// 003_hosted.ts). Accounts stay in the core Store (the CLI creates them and sets their plans), and
// so does countCredentials: the key cap it counts covers API keys and fleet keys too.
import type { Scope, Token } from './types.ts';

export interface OAuthClient {
  id: string;
  name: string;
  redirectUris: string[];
  createdAt: Date;
}

/** An authorization code as stored: everything the token endpoint must check it against. */
export interface AuthorizationCode {
  clientId: string;
  redirectUri: string;
  /** base64url SHA-256 of the verifier (PKCE S256 is the only method). */
  codeChallenge: string;
  resource: string;
  accountId: string;
  deviceId: string;
  scopes: Scope[];
}

/** What an account sees of an OAuth connection on its dashboard. */
export interface OAuthGrant {
  id: string;
  accountId: string;
  clientId: string;
  clientName: string;
  deviceId: string;
  scopes: Scope[];
  createdAt: Date;
  /** The client's registered redirect URIs (where its codes go). */
  redirectUris?: string[];
  /** When its latest access token was minted (first exchange or last refresh). */
  lastUsedAt?: Date | null;
}

/** A minted OAuth access token (an ordinary device-bound token) and its refresh token, as hashes. */
export interface OAuthTokenPair {
  access: { id: string; hash: string; expiresAt: Date };
  refresh: { hash: string; expiresAt: Date };
}

export type RefreshResult =
  | { ok: true; token: Token; grantId: string }
  /** invalid: unknown, expired or another client's; reused: a rotated token came back, the grant is gone. */
  | { ok: false; error: 'invalid' | 'reused' }
  /** The asked scopes are not all the grant's: nothing rotated. */
  | { ok: false; error: 'scope'; granted: Scope[] }
  /** Asked with `refused` and the token was not a rotated one: nothing done. */
  | { ok: false; error: 'refused' };

export interface HostedStore {
  // --- Sign-in and web sessions ------------------------------------------------------------
  createSigninCode(input: { codeHash: string; email: string; nextPath: string | null; expiresAt: Date }): Promise<void>;
  /** Atomically marks the code used and returns it; undefined when unknown, used or expired. */
  consumeSigninCode(codeHash: string, now: Date): Promise<{ email: string; nextPath: string | null } | undefined>;
  /** The address an unused, unexpired code signs into, without consuming it; undefined otherwise. */
  peekSigninCode(codeHash: string, now: Date): Promise<{ email: string } | undefined>;
  createWebSession(input: { tokenHash: string; accountId: string; expiresAt: Date }): Promise<void>;
  findWebSession(tokenHash: string, now: Date): Promise<{ accountId: string; expiresAt: Date } | undefined>;
  deleteWebSession(tokenHash: string): Promise<void>;

  // --- OAuth authorization server ----------------------------------------------------------
  registerOAuthClient(input: { id: string; name: string; redirectUris: string[] }): Promise<OAuthClient>;
  getOAuthClient(id: string): Promise<OAuthClient | undefined>;
  /**
   * Creates or updates the client a metadata document describes (its id is the document's URL),
   * so codes and grants can name it (docs/decisions/0165-client-id-metadata-documents.md).
   */
  putMetadataClient(input: { id: string; name: string; redirectUris: string[] }): Promise<OAuthClient>;
  createAuthorizationCode(input: AuthorizationCode & { codeHash: string; expiresAt: Date }): Promise<void>;
  /** Single use: atomically marks the code used and returns it; undefined when unknown, used or expired. */
  consumeAuthorizationCode(codeHash: string, now: Date): Promise<AuthorizationCode | undefined>;
  /**
   * Creates the grant, its first access token and refresh token; no_device when the phone is gone,
   * limit_reached when the account's standing credentials (credentials.ts, credentialsInUse) are at its key cap
   * (docs/decisions/0164-grants-count-against-the-key-cap.md).
   */
  issueOAuthGrant(
    input: { grantId: string; accountId: string; clientId: string; deviceId: string; scopes: Scope[] } & OAuthTokenPair,
  ): Promise<{ ok: true; token: Token } | { ok: false; error: 'no_device' | 'limit_reached' }>;
  /**
   * Rotates a refresh token: the presented one is marked used, a new pair is minted with the
   * grant's scopes, or with `scopes` when asked (RFC 6749 §6: only a narrowing; the grant and the
   * next refresh keep the whole). A used (rotated) one revokes the whole grant, its access
   * tokens included, whatever else the request is: `refused` (the token endpoint refuses the
   * request anyway, e.g. for its resource) does only that, and rotates nothing.
   */
  refreshOAuthGrant(
    input: { refreshHash: string; clientId: string; now: Date; scopes?: Scope[]; refused?: boolean } & OAuthTokenPair,
  ): Promise<RefreshResult>;
  listOAuthGrants(accountId: string): Promise<OAuthGrant[]>;
  /** Deletes the grant, its refresh tokens and access tokens (journalled as token_revoked each). */
  revokeOAuthGrant(id: string): Promise<boolean>;
}
