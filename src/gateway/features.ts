// The one registration point for optional features (docs/decisions/0174-gateway-features.md):
// the gateway starts each feature it is given with a FeatureHost and knows none by name (hosted
// mode and fleets are both features). A feature adds HTTP routes, serves MCP on its own URLs
// with its own credentials (mount), may explain keys /mcp does not know, and may serve OAuth
// for /mcp (offerOAuth).
import type { HttpRequest, TemplatedApp } from '../uws.ts';
import type { GatewayContext } from './context.ts';
import type { Credential } from './auth.ts';

/** A refusal answered as `{"error": code, "message": …}` with `status`. */
export interface Refusal {
  status: number;
  code: string;
  message: string;
}

export function isRefusal(x: Credential | Refusal | undefined): x is Refusal {
  return x !== undefined && 'code' in x && 'status' in x;
}

/**
 * Where the credential of a mounted MCP route comes from. `capture` runs synchronously in the
 * uWS handler (path parameters and headers are readable only then); `resolve` decides. The
 * Credential it returns is used exactly as a device key's on /mcp: its token's id is the caller
 * the phone sees, its deviceId the phone reached, its scopes the tools it may call.
 * undefined: no usable key (the plain 401).
 */
export interface CredentialSource<C> {
  capture(req: HttpRequest): C;
  resolve(token: string | undefined, captured: C): Promise<Credential | Refusal | undefined>;
}

/** What the MCP endpoint offers features. */
export interface McpMount {
  /** Serves POST/GET/DELETE on `pattern` exactly as /mcp, with credentials from `source`. */
  mount<C>(pattern: string, source: CredentialSource<C>): void;
  /** Asked when /mcp does not know a presented key: a specific refusal instead of the plain 401. */
  explainUnknownKey(fn: (token: string) => Promise<Refusal | undefined>): void;
  /**
   * The feature runs an OAuth authorization server for /mcp: 401s carry
   * `resource_metadata="<url>"` (RFC 9728) and say to connect with OAuth, and the gateway's
   * own "this relay runs no OAuth server" answers on the discovery paths are left out.
   */
  offerOAuth(resourceMetadataUrl: () => string): void;
}

export interface FeatureHost {
  /** The client port's routes (drain-aware, counted per route). */
  app: TemplatedApp;
  ctx: GatewayContext;
  mcp: McpMount;
}

export interface StartedFeature {
  close(): void | Promise<void>;
}

export interface GatewayFeature {
  readonly name: string;
  /** Called once, before the node listens. */
  start(host: FeatureHost): StartedFeature | void;
}
