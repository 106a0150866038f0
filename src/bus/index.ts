// Picks the bus driver: in-process unless --redis-url is given.
import type { RelayConfig } from '../config.ts';
import type { Logger } from '../log.ts';
import type { Bus } from './types.ts';
import { LocalBus } from './local/index.ts';

export type { Bus, ControlEvent, DeviceOwner, ReplayEvent, SessionRecord, SessionStore } from './types.ts';
export { BusTimeoutError, BusUnavailableError } from './errors.ts';
export { parseEventId } from './util.ts';

export async function createBus(
  config: Pick<RelayConfig, 'redisUrl' | 'nodeId'> & { redisPrefix?: string; budgets?: RelayConfig['budgets'] },
  log: Logger,
): Promise<Bus> {
  if (!config.redisUrl)
    return new LocalBus({
      nodeId: config.nodeId,
      log,
      replayBudget: config.budgets && {
        nodeBytes: config.budgets.replayNodeBytes,
        credentialBytes: config.budgets.replayKeyBytes,
      },
    });
  const { RedisBus } = await import('./redis/index.ts');
  return RedisBus.connect(config.redisUrl, config.nodeId, log, { prefix: config.redisPrefix });
}
