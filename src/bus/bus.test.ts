// One contract, both drivers: what the gateway may rely on whichever bus it runs on (contract.ts).
import { afterAll } from 'vitest';
import { busContract, replay } from './contract.ts';
import { LocalBus } from './local/index.ts';
import { RedisBus } from './redis/index.ts';
import { dropPrefix, quietLog, randomPrefix, REDIS_URL } from './redis/test-support.ts';

const prefix = randomPrefix();
let n = 0;

afterAll(() => dropPrefix(prefix));

busContract([
  // eslint-disable-next-line @typescript-eslint/require-await -- the same shape as the Redis driver, which connects
  ['local', async (r = replay) => new LocalBus({ nodeId: 'solo', replay: r })],
  ['redis', (r = replay) => RedisBus.connect(REDIS_URL, `solo-${++n}`, quietLog, { prefix, replay: r })],
]);
