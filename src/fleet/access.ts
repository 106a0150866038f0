// Who may reach a phone on /mcp/devices/<deviceId> (docs/PROTOCOL.md "Fleets"): pure decisions,
// the I/O is src/fleet/mcp-source.ts's.
import type { Credential } from '../gateway/auth.ts';
import type { Refusal } from '../gateway/features.ts';
import type { DeviceLabels } from '../store/index.ts';
import { factLabels, formatSelector, matches } from './labels.ts';
import type { ResolvedFleetKey } from './keys.ts';

/** The header an allocation's holder sends with every call on the phone it holds. */
export const ALLOCATION_HEADER = 'x-phonebridge-allocation';

/** At most this much of a caller's own input goes back in a message. */
const SHOWN_MAX = 64;

/**
 * A path segment or header value the caller sent, as a refusal quotes it: control characters
 * escaped, cut at SHOWN_MAX characters, so a 3,000-character or NUL-laden id is not echoed whole.
 */
export function shown(input: string, max = SHOWN_MAX): string {
  const cut = input.length > max ? `${input.slice(0, max)}…` : input;
  // eslint-disable-next-line no-control-regex
  return cut.replace(/[\u0000-\u001f\u007f]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`);
}

/**
 * A URL path segment decoded, or undefined when it is not valid percent-encoding ("%ZZ", a cut
 * UTF-8 sequence): decodeURIComponent throws on those, and a throw in a uWS handler ends the process.
 */
export function decodedSegment(raw: string): string | undefined {
  try {
    return decodeURIComponent(raw);
  } catch {
    return undefined;
  }
}

/** Hand-set labels and the phone's facts, as selectors see them. */
export function allLabels(d: Pick<DeviceLabels, 'labels' | 'initResult'>): Record<string, string> {
  return { ...d.labels, ...factLabels(d.initResult) };
}

/** A device key presented on another phone's URL is refused; on its own phone's URL it works as on /mcp. */
export function deviceKeyOnUrl(cred: Credential, deviceId: string): Credential | Refusal {
  if (cred.token.deviceId === deviceId) return cred;
  return {
    status: 403,
    code: 'wrong_device',
    message: `this key is bound to phone ${cred.token.deviceId}; use it on /mcp (or /mcp/devices/${cred.token.deviceId}), or use a fleet key for ${shown(deviceId)}`,
  };
}

/**
 * A fleet key on a phone: the credential the endpoint uses (the fleet key as caller, bound to
 * this phone), or why not. `allocation` is the phone's live allocation (its id and holder), `presented` the
 * allocation header's value.
 */
export function fleetAccess(
  fk: ResolvedFleetKey,
  deviceId: string,
  device: DeviceLabels | undefined,
  allocation: { id: string; keyId: string } | null,
  presented: string | undefined,
): Credential | Refusal {
  if (!device || device.accountId !== fk.account.id)
    return {
      status: 404,
      code: 'device_not_found',
      message: `no phone ${shown(deviceId)} in this fleet key's account`,
    };
  if (!matches(fk.selector, allLabels(device)))
    return {
      status: 403,
      code: 'outside_selector',
      message: `phone ${deviceId} does not match this fleet key's selector "${formatSelector(fk.selector)}"; label the phone or use a fleet key whose selector matches it`,
    };
  if (allocation !== null && (allocation.id !== presented || allocation.keyId !== fk.key.id))
    return {
      status: 409,
      code: 'device_allocated',
      message: `phone ${deviceId} is allocated to another caller; allocate a free phone with POST /api/v1/allocations (the holder sends its allocation id in X-Phonebridge-Allocation)`,
    };
  if (allocation === null && presented !== undefined)
    return {
      status: 409,
      code: 'allocation_ended',
      message: `allocation ${shown(presented)} is not live on phone ${deviceId} (expired, released or revoked); allocate again`,
    };
  return {
    token: {
      id: fk.key.id,
      accountId: fk.account.id,
      deviceId,
      scopes: fk.key.scopes,
      via: 'key',
      expiresAt: null,
      createdAt: fk.key.createdAt,
    },
    account: fk.account,
  };
}
