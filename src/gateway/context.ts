// What every request handler on a node can reach.
import type { RelayConfig } from '../config.ts';
import type { Store } from '../store/types.ts';
import type { Bus } from '../bus/types.ts';
import type { Logger } from '../log.ts';
import type { Hub } from './hub.ts';
import type { Authenticator } from './auth.ts';
import type { Router } from './router.ts';

export interface GatewayContext {
  config: RelayConfig;
  store: Store;
  bus: Bus;
  hub: Hub;
  auth: Authenticator;
  router: Router;
  log: Logger;
  state: { draining: boolean };
}
