// Hosted mode's HTTP surface (docs/HOSTED.md): sign-in, the dashboard and the OAuth server,
// registered on a node's app only with --hosted.
import type { TemplatedApp } from '../uws.ts';
import type { GatewayContext } from '../gateway/context.ts';
import { createMailer } from './mail.ts';
import { registerSigninRoutes } from './signin.ts';
import { registerDashboardRoutes } from './dashboard.ts';
import { registerOAuthRoutes } from './oauth.ts';

export { resourceMetadataUrl } from './oauth.ts';

export function registerHostedRoutes(app: TemplatedApp, ctx: GatewayContext): void {
  const mailer = createMailer(ctx.config, ctx.log);
  registerSigninRoutes(app, ctx, mailer);
  registerDashboardRoutes(app, ctx);
  registerOAuthRoutes(app, ctx);
}
