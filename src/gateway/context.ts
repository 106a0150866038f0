// What every request handler on a node can reach.
import type { RelayConfig } from '../config.ts';
import type { Store } from '../store/types.ts';
import type { Bus } from '../bus/types.ts';
import type { Logger } from '../log.ts';
import type { Hub } from './hub.ts';
import type { Authenticator } from './auth.ts';
import type { Router } from './router.ts';
import type { DeviceKeyLookup, DeviceSeenWriter } from './device-batch.ts';
import type { DeviceReleases } from './device-releases.ts';

export interface GatewayContext {
  config: RelayConfig;
  store: Store;
  bus: Bus;
  hub: Hub;
  auth: Authenticator;
  router: Router;
  /** The store work of phone accepts, batched (src/gateway/device-batch.ts). */
  devices: { keys: DeviceKeyLookup; seen: DeviceSeenWriter };
  /** Phone claims to release, those the bus could not take kept until it is back (src/gateway/device-releases.ts). */
  releases: DeviceReleases;
  log: Logger;
  state: { draining: boolean };
  /** sha256:<hex> of the TLS leaf's SPKI when this node terminates TLS: the `fp` of every QR it makes. */
  fingerprint?: string;
}
