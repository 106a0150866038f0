// Fleets (docs/decisions/0170-fleet-model.md): labels, fleet keys on /mcp/devices/<deviceId>,
// allocations, enrollment codes and the /api/v1 HTTP API — one GatewayFeature, so the gateway
// never names it (src/gateway/features.ts).
import type { GatewayFeature } from '../gateway/features.ts';
import { FleetKeyLookup } from './keys.ts';
import { deviceUrlSource, explainFleetKeyOnMcp } from './mcp-source.ts';
import { registerApi } from './api/server.ts';
import { ROUTES } from './api/routes.ts';
import { trackFleetGauges } from './metrics.ts';
import { startPoolWaiters } from './pool-waiters.ts';

export const DEVICE_URL_PATTERN = '/mcp/devices/:deviceId';
/** Default per-key budget of /api/v1 requests per minute (cluster-wide). */
export const API_REQUESTS_PER_MINUTE = 6000;

export function fleetFeature(opts: { apiRequestsPerMinute?: number } = {}): GatewayFeature {
  return {
    name: 'fleet',
    start({ app, ctx, mcp }) {
      const keys = new FleetKeyLookup(ctx.store);
      // Revocations (journal and bus) reach every node; this node's fleet key cache forgets at once.
      ctx.hub.onRevoke((match) => keys.invalidate(match));
      mcp.mount(DEVICE_URL_PATTERN, deviceUrlSource(ctx, keys));
      mcp.explainUnknownKey(explainFleetKeyOnMcp(keys));
      registerApi(app, ctx, keys, ROUTES, {
        requestsPerMinute: opts.apiRequestsPerMinute ?? API_REQUESTS_PER_MINUTE,
      });
      trackFleetGauges(ctx.store);
      const waiters = startPoolWaiters(ctx);
      return { close: () => waiters.close() };
    },
  };
}
