// Hosted mode's HTTP surface (docs/HOSTED.md): sign-in, the dashboard and the OAuth server, one
// gateway feature (docs/decisions/0174-gateway-features.md) that services/serve.ts passes only
// with --hosted, so the gateway never names it.
import type { GatewayFeature } from '../gateway/features.ts';
import { createMailer } from './mail.ts';
import { registerSigninRoutes } from './signin.ts';
import { registerAccountNotFound, registerDashboardRoutes, type DashboardOptions } from './dashboard.ts';
import { registerOAuthRoutes, resourceMetadataUrl } from './oauth.ts';
import { ClientMetadataFetcher, type ClientMetadataOptions } from './client-metadata.ts';
import { MethodRoutes } from '../gateway/http.ts';

export { resourceMetadataUrl } from './oauth.ts';

/** What a program starting the relay may set; nothing here turns a check off. */
export interface HostedOptions extends DashboardOptions {
  /** How client metadata documents are fetched: a resolver, an extra CA (client-metadata.ts). */
  clientMetadata?: ClientMetadataOptions;
}

export function hostedFeature(opts: HostedOptions = {}): GatewayFeature {
  return {
    name: 'hosted',
    start({ app, ctx, mcp }) {
      const mailer = createMailer(ctx.config, ctx.log);
      const metadata = new ClientMetadataFetcher(opts.clientMetadata);
      const routes = new MethodRoutes(app);
      registerSigninRoutes(routes, ctx, mailer);
      registerDashboardRoutes(routes, ctx, opts);
      registerOAuthRoutes(routes, ctx, metadata);
      registerAccountNotFound(routes, ctx);
      routes.finish();
      // The public URL is final only once the node listens (port 0), so it is read per answer.
      mcp.offerOAuth(() => resourceMetadataUrl(ctx.config.publicUrl));
      return { close: () => metadata.close() };
    },
  };
}
