// `node --import tsx loadtest/node-hop.bench.ts [--rate 1700] [--seconds 4] [--rounds 3]`: what
// one cross-node hop costs, request and answer, between two processes — the part of a
// cross-node call that is neither HTTP nor the phone (docs/BENCHMARKS.md, "Where the targets
// stand"). Five ways, in alternating rounds at the same open-loop rate:
//   redis  the relay's own bus (src/bus/redis): the origin's sendToNode (waiting for Redis'
//          reply, as before 0225), the owner's replyToNode (the quiet connection), through a
//          real Redis;
//   quiet  the same, with the request on the quiet connection too (replyToNode both ways):
//          what a request costs without Redis' reply to its publish, the receiver count
//          (docs/decisions/0142-quiet-answers.md), and without any word of nobody hearing it;
//   bounce the request as the relay sends it since docs/decisions/0225-quiet-requests.md
//          (sendOrBounce: quiet, one EVAL that tells the origin when nobody heard it);
//   raw    Redis pub/sub as in quiet, through a minimal RESP writer and reader (loadtest/lib/raw-pubsub.ts)
//          instead of ioredis: what of the hop is the client library, what is Redis;
//   tcp    the same bytes over one direct TCP connection between the two processes
//          (newline-framed, one write per message): a path without Redis in between.
// Reports per round trip: CPU of both processes (and of Redis, from INFO cpu), and p50/p99.
// Measurement only: it argues for or against a path between nodes, it is not one.
import { fork } from 'node:child_process';
import { createConnection, createServer, type Socket } from 'node:net';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { RedisBus } from '../src/bus/redis/index.ts';
import { quietLog, randomPrefix, REDIS_URL } from '../src/bus/redis/test-support.ts';
import { rawPubSub } from './lib/raw-pubsub.ts';
import { redisCounter } from './lib/redis-commands.ts';

const SELF = fileURLToPath(import.meta.url);
// A small call's forwarded params, about the size the relay sends for `echo`.
const PAYLOAD = JSON.stringify({
  name: 'echo',
  arguments: { text: 'hi' },
  _meta: { 'phonebridge/caller': { scopes: ['devices:read'], tokenId: 'key_0123456789abcdef' } },
});

const cpuUs = () => {
  const c = process.cpuUsage();
  return c.user + c.system;
};

/** Newline-framed messages off a socket, each handed to `on` (a message holds no newline). */
function lines(socket: Socket, on: (line: string) => void): void {
  let rest = '';
  socket.setEncoding('utf8');
  socket.on('data', (chunk: string) => {
    let from = 0;
    for (let nl = chunk.indexOf('\n'); nl >= 0; nl = chunk.indexOf('\n', from)) {
      on(rest + chunk.slice(from, nl));
      rest = '';
      from = nl + 1;
    }
    rest += chunk.slice(from);
  });
}

// ---- the owner: answers every request it hears, both ways ------------------------------

async function owner(prefix: string): Promise<void> {
  const bus = await RedisBus.connect(REDIS_URL, 'hop-owner', quietLog, { prefix });
  bus.onNodeMessage((m) => void bus.replyToNode('hop-origin', m).catch(() => {}));
  const raw = await rawPubSub(REDIS_URL, `${prefix}raw:owner`, (m) => raw.publish(`${prefix}raw:origin`, m));
  const server = createServer((s) => {
    s.setNoDelay(true);
    lines(s, (m) => s.write(`${m}\n`));
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  process.on('message', (m: { op: string }) => {
    if (m.op === 'cpu') process.send!({ cpu: cpuUs() });
    if (m.op === 'stop') void bus.close().finally(() => process.exit(0));
  });
  process.send!({ ready: (server.address() as { port: number }).port });
}

// ---- the origin: an open loop of calls, and the measurements ----------------------------

async function origin(): Promise<void> {
  const { values } = parseArgs({
    options: {
      rate: { type: 'string', default: '1700' },
      seconds: { type: 'string', default: '4' },
      rounds: { type: 'string', default: '3' },
    },
  });
  const rate = Math.max(10, Math.min(20_000, Number(values.rate)));
  const ms = Math.max(500, Math.min(30_000, Number(values.seconds) * 1000));
  const rounds = Math.max(1, Math.min(10, Number(values.rounds)));
  const prefix = randomPrefix();
  const child = fork(SELF, ['--role', 'owner', prefix], { execArgv: ['--import', 'tsx'] });
  const fromChild = <T>(key: string) =>
    new Promise<T>((resolve) => {
      const on = (m: Record<string, T>) => {
        if (key in m) {
          child.off('message', on);
          resolve(m[key]);
        }
      };
      child.on('message', on);
    });
  const port = await fromChild<number>('ready');
  const ownerCpuUs = () => {
    const answer = fromChild<number>('cpu');
    child.send({ op: 'cpu' });
    return answer;
  };
  const bus = await RedisBus.connect(REDIS_URL, 'hop-origin', quietLog, { prefix });
  const redis = await redisCounter(REDIS_URL);
  const tcp = createConnection({ host: '127.0.0.1', port });
  tcp.setNoDelay(true);
  await new Promise<void>((r) => tcp.once('connect', () => r()));

  const waiting = new Map<string, () => void>();
  const answered = (m: string) => {
    const id = m.slice(0, m.indexOf(' '));
    waiting.get(id)?.();
    waiting.delete(id);
  };
  bus.onNodeMessage(answered);
  const raw = await rawPubSub(REDIS_URL, `${prefix}raw:origin`, answered);
  lines(tcp, answered);
  let seq = 0;
  const send = {
    redis: (msg: string) => void bus.sendToNode('hop-owner', msg),
    quiet: (msg: string) => void bus.replyToNode('hop-owner', msg),
    bounce: (msg: string) =>
      void bus.sendOrBounce('hop-owner', msg, undefined, `${msg.slice(0, msg.indexOf(' '))} unheard`),
    raw: (msg: string) => raw.publish(`${prefix}raw:owner`, msg),
    tcp: (msg: string) => void tcp.write(`${msg}\n`),
  };

  const WAYS = ['redis', 'quiet', 'bounce', 'raw', 'tcp'] as const;
  // The quiet connection is ready once its CLIENT REPLY probe is answered.
  for (let i = 0; i < 40 && !bus.quietReady; i++) await new Promise((r) => setTimeout(r, 50));
  if (!bus.quietReady) throw new Error('the quiet connection is not ready (CLIENT REPLY refused?)');
  const round = async (way: (typeof WAYS)[number]) => {
    const lat: number[] = [];
    const cpu0 = cpuUs();
    const child0 = await ownerCpuUs();
    const redis0 = await redis.cpuUs();
    const interval = 1000 / rate;
    const t0 = performance.now();
    const inflight: Array<Promise<void>> = [];
    for (let i = 0; performance.now() < t0 + ms;) {
      const now = performance.now();
      for (; t0 + i * interval <= now; i++) {
        const id = String(++seq);
        // From the send, not the schedule: the 1 ms timer's lateness is the same for both ways
        // and says nothing about the hop.
        const sent = performance.now();
        inflight.push(
          new Promise<void>((resolve) => {
            waiting.set(id, () => {
              lat.push(performance.now() - sent);
              resolve();
            });
            send[way](`${id} ${PAYLOAD}`);
          }),
        );
      }
      await new Promise((r) => setTimeout(r, 1));
    }
    await Promise.race([Promise.all(inflight), new Promise((r) => setTimeout(r, 5000))]);
    const cpu = cpuUs() - cpu0;
    const childCpu = (await ownerCpuUs()) - child0;
    const redisCpu = (await redis.cpuUs()) - redis0;
    lat.sort((a, b) => a - b);
    const n = Math.max(1, lat.length);
    return {
      way,
      calls: lat.length,
      lost: inflight.length - lat.length,
      nodesCpuUsPerCall: Math.round(((cpu + childCpu) / n) * 10) / 10,
      redisCpuUsPerCall: Math.round((redisCpu / n) * 10) / 10,
      p50Ms: Math.round(lat[Math.floor(n * 0.5)] * 1000) / 1000,
      p99Ms: Math.round(lat[Math.min(lat.length - 1, Math.floor(n * 0.99))] * 1000) / 1000,
    };
  };

  for (const way of WAYS) await round(way); // warm-up, every way
  const results = [];
  for (let r = 0; r < rounds; r++) for (const way of WAYS) results.push(await round(way));
  console.log(JSON.stringify({ rate, seconds: ms / 1000, rounds: results }, null, 2));
  for (const way of WAYS) {
    const rs = results.filter((r) => r.way === way);
    const med = (k: 'nodesCpuUsPerCall' | 'redisCpuUsPerCall' | 'p50Ms' | 'p99Ms') =>
      [...rs.map((r) => r[k])].sort((a, b) => a - b)[Math.floor(rs.length / 2)];
    console.log(
      `${way.padEnd(5)} at ${rate}/s: both processes ${med('nodesCpuUsPerCall')} µs per round trip, Redis ${med('redisCpuUsPerCall')} µs, p50 ${med('p50Ms')} ms, p99 ${med('p99Ms')} ms (medians of ${rs.length})`,
    );
  }
  child.send({ op: 'stop' });
  tcp.destroy();
  raw.close();
  await bus.close();
  await redis.dropPrefix(prefix);
  redis.close();
}

const role = process.argv.indexOf('--role');
if (role >= 0 && process.argv[role + 1] === 'owner') await owner(process.argv[role + 2]);
else await origin();
