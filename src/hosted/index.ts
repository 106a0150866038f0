// Hosted mode's HTTP surface (docs/HOSTED.md): sign-in, the dashboard and the OAuth server —
// one GatewayFeature (docs/decisions/0174-gateway-features.md), passed by services/serve.ts only
// with --hosted, so the gateway never names it.
import type { TemplatedApp } from '../uws.ts';
import type { GatewayContext } from '../gateway/context.ts';
import type { GatewayFeature } from '../gateway/features.ts';
import { createMailer } from './mail.ts';
import { registerSigninRoutes } from './signin.ts';
import { registerDashboardRoutes } from './dashboard.ts';
import { registerOAuthRoutes, resourceMetadataUrl } from './oauth.ts';

export { resourceMetadataUrl } from './oauth.ts';

export function registerHostedRoutes(app: TemplatedApp, ctx: GatewayContext): void {
  const mailer = createMailer(ctx.config, ctx.log);
  registerSigninRoutes(app, ctx, mailer);
  registerDashboardRoutes(app, ctx);
  registerOAuthRoutes(app, ctx);
}

export function hostedFeature(): GatewayFeature {
  return {
    name: 'hosted',
    start({ app, ctx, mcp }) {
      registerHostedRoutes(app, ctx);
      // The public URL is final only once the node listens (port 0), so it is read per answer.
      mcp.offerOAuth(() => resourceMetadataUrl(ctx.config.publicUrl));
    },
  };
}
