// The credential source of /mcp/devices/<deviceId> (src/gateway/features.ts): a device key for
// that phone works as on /mcp; a fleet key works on any phone of its account its selector
// matches, unless another caller holds the phone's allocation.
import type { HttpRequest } from '../uws.ts';
import type { GatewayContext } from '../gateway/context.ts';
import { isRefusal, type CredentialSource, type Refusal } from '../gateway/features.ts';
import type { Credential } from '../gateway/auth.ts';
import { ALLOCATION_HEADER, decodedSegment, deviceKeyOnUrl, fleetAccess } from './access.ts';
import { isFleetToken, type FleetKeyLookup } from './keys.ts';

interface Captured {
  deviceId: string;
  allocation: string | undefined;
}

export function deviceUrlSource(ctx: GatewayContext, keys: FleetKeyLookup): CredentialSource<Captured> {
  const uses = new KeyUses(ctx);
  return {
    capture(req: HttpRequest): Captured {
      const raw = req.getParameter(0) ?? '';
      return {
        // Not valid percent-encoding: taken as written, so it names no phone (device_not_found).
        deviceId: decodedSegment(raw) ?? raw,
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
      const access = fleetAccess(fk, deviceId, found?.device, found?.allocation ?? null, allocation);
      // The phones a key was used on hear of its revocation (docs/decisions/0178-fleet-key-revocation-reaches-phones.md): an
      // allocation's holder was recorded with the allocation, any other use once per node.
      if (!isRefusal(access) && !found?.allocation) await uses.record(fk.key.id, deviceId);
      return access;
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

/** Key-on-phone uses this node has written to the store already (bounded; a forgotten one is written again, idempotently). */
class KeyUses {
  private readonly known = new Set<string>();
  constructor(private readonly ctx: GatewayContext) {}

  async record(keyId: string, deviceId: string): Promise<void> {
    const k = `${keyId} ${deviceId}`;
    if (this.known.has(k)) return;
    await this.ctx.store.fleet.recordKeyUse(keyId, deviceId);
    if (this.known.size >= KEY_USES_MAX) this.known.clear();
    this.known.add(k);
  }
}

const KEY_USES_MAX = 100_000;
