// Hosted mode's HTTP surface (docs/HOSTED.md): sign-in, the dashboard and the OAuth server, one
// gateway feature (src/gateway/features.ts) that services/serve.ts starts only with --hosted.
import type { GatewayFeature } from '../gateway/features.ts';
import { createMailer } from './mail.ts';
import { registerSigninRoutes } from './signin.ts';
import { registerDashboardRoutes, type DashboardOptions } from './dashboard.ts';
import { registerOAuthRoutes } from './oauth.ts';
import { ClientMetadataFetcher, type ClientMetadataOptions } from './client-metadata.ts';

export { resourceMetadataUrl } from './oauth.ts';

/** What a program starting the relay may set; nothing here turns a check off. */
export interface HostedOptions extends DashboardOptions {
  /** How client metadata documents are fetched: a resolver, an extra CA (client-metadata.ts). */
  clientMetadata?: ClientMetadataOptions;
}

export function hostedFeature(opts: HostedOptions = {}): GatewayFeature {
  return {
    name: 'hosted',
    start({ app, ctx }) {
      const mailer = createMailer(ctx.config, ctx.log);
      const metadata = new ClientMetadataFetcher(opts.clientMetadata);
      registerSigninRoutes(app, ctx, mailer);
      registerDashboardRoutes(app, ctx, opts);
      registerOAuthRoutes(app, ctx, metadata);
      return { close: () => metadata.close() };
    },
  };
}
