// Who is calling /mcp: the key's credential (from the node's cache while Postgres is away), a
// mounted route's own source (src/gateway/features.ts), or the answer a client without one gets
// (401 with the challenge, 402 for a locked account, a feature's specific refusal).
import type { Exchange } from './http.ts';
import type { GatewayContext } from './context.ts';
import { presentedToken, type Credential } from './auth.ts';
import { isRefusal, type CredentialSource, type Refusal } from './features.ts';
import type { McpHeaders } from './mcp-headers.ts';
import { storeUnavailable } from './pairing.ts';
import { unauthorized } from './unauthorized.ts';
import { JSON_HEADERS } from './mcp-stateless.ts';
import { clientAuthFailures } from '../metrics.ts';

/** A request on a mounted route (src/gateway/features.ts): its source and what it captured. */
export interface Bound {
  source: CredentialSource<unknown>;
  captured: unknown;
}

export class ClientAuth {
  /** Features that can say why /mcp does not know a key (src/gateway/features.ts). */
  readonly explainers: Array<(token: string) => Promise<Refusal | undefined>> = [];
  /** The OAuth discovery document a feature serves for /mcp (McpMount.offerOAuth), if any. */
  resourceMetadata: (() => string) | undefined;

  constructor(private readonly ctx: GatewayContext) {}

  /**
   * With a feature serving OAuth for /mcp (McpMount.offerOAuth), the challenge points OAuth
   * clients at its discovery document (RFC 9728).
   */
  private get challenge(): string {
    return this.resourceMetadata
      ? `Bearer realm="phonebridge", resource_metadata="${this.resourceMetadata()}"`
      : 'Bearer realm="phonebridge"';
  }

  async authenticate(ex: Exchange, h: McpHeaders, bound: Bound | undefined): Promise<Credential | undefined> {
    let cred: Credential | undefined;
    try {
      const token = presentedToken(h);
      // Known keys are answered from the node's cache, so traffic goes on while Postgres is away.
      const found = bound
        ? await bound.source.resolve(token, bound.captured)
        : ((await this.ctx.auth.authenticate(token)) ?? (token ? await this.explain(token) : undefined));
      if (isRefusal(found)) {
        clientAuthFailures.invalid.inc();
        ex.error(found.status, found.code, found.message);
        return undefined;
      }
      cred = found;
    } catch (err) {
      clientAuthFailures.store_unavailable.inc();
      this.ctx.log.warn({ err: String(err) }, 'auth: store unavailable');
      storeUnavailable(ex);
      return undefined;
    }
    if (!cred) {
      const presented = !!presentedToken(h);
      clientAuthFailures[presented ? 'invalid' : 'missing'].inc();
      const answer = unauthorized(this.challenge, presented, !!this.resourceMetadata);
      ex.send(401, { ...JSON_HEADERS, ...answer.headers }, answer.body);
      return undefined;
    }
    if (cred.account.locked) {
      clientAuthFailures.locked.inc();
      ex.error(402, 'subscription_required', 'the account has no active subscription; pairings and keys are kept');
      return undefined;
    }
    return cred;
  }

  /** The first refusal a feature gives for a key /mcp does not know. */
  private async explain(token: string): Promise<Refusal | undefined> {
    for (const fn of this.explainers) {
      const r = await fn(token);
      if (r) return r;
    }
    return undefined;
  }
}
