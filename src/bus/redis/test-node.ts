// A bus node in its own process, for the kill -9 test: connects, claims DEVICE, prints "ready".
import { createLogger } from '../../log.ts';
import { RedisBus } from './index.ts';

const env = process.env as Record<string, string>;
const bus = await RedisBus.connect(env.REDIS_URL, env.NODE_ID, createLogger({ level: 'silent' }), {
  prefix: env.PREFIX,
  nodeTtlMs: Number(env.NODE_TTL_MS),
  heartbeatMs: Number(env.HEARTBEAT_MS),
});
const epoch = await bus.claimDevice(env.DEVICE);
process.stdout.write(`ready ${epoch}\n`);
setInterval(() => {}, 1 << 30); // the bus timer is unref'd; stay alive until killed
