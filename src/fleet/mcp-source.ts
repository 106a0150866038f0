// The credential source of /mcp/devices/<deviceId> (src/gateway/features.ts): a device key for
// that phone works as on /mcp; a fleet key works on any phone of its account its selector
// matches, unless another caller holds the phone's allocation.
import type { HttpRequest } from '../uws.ts';
import type { GatewayContext } from '../gateway/context.ts';
import type { CredentialSource, Refusal } from '../gateway/features.ts';
import type { Credential } from '../gateway/auth.ts';
import { ALLOCATION_HEADER, deviceKeyOnUrl, fleetAccess } from './access.ts';
import { isFleetToken, type FleetKeyLookup } from './keys.ts';

interface Captured {
  deviceId: string;
  allocation: string | undefined;
}

export function deviceUrlSource(ctx: GatewayContext, keys: FleetKeyLookup): CredentialSource<Captured> {
  return {
    capture(req: HttpRequest): Captured {
      return {
        deviceId: decodeURIComponent(req.getParameter(0) ?? ''),
        allocation: req.getHeader(ALLOCATION_HEADER) || undefined,
      };
    },
    async resolve(token, { deviceId, allocation }): Promise<Credential | Refusal | undefined> {
      if (!token) return undefined;
      if (!isFleetToken(token)) {
        const cred = await ctx.auth.authenticate(token);
        return cred && deviceKeyOnUrl(cred, deviceId);
      }
      const fk = await keys.resolve(token);
      if (!fk) return undefined;
      // Labels, facts and the live allocation in one uncached read: a relabel, an allocation or
      // a release takes effect on the next call, on every node.
      const found = await ctx.store.fleet.deviceAccess(deviceId, new Date());
      return fleetAccess(fk, deviceId, found?.device, found?.allocationId ?? null, allocation);
    },
  };
}

/** A fleet key on plain /mcp: say where it works instead of a bare 401. */
export function explainFleetKeyOnMcp(keys: FleetKeyLookup) {
  return async (token: string): Promise<Refusal | undefined> => {
    if (!isFleetToken(token) || !(await keys.resolve(token))) return undefined;
    return {
      status: 400,
      code: 'fleet_key_needs_device_url',
      message:
        'this is a fleet key: it reaches many phones, so it is used on /mcp/devices/<deviceId> (list phones with GET /api/v1/devices or allocate one with POST /api/v1/allocations)',
    };
  };
}
