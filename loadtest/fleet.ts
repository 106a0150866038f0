// The fleet simulator: many simulated phones in one process, each with its
// own P-256 key and state dir, its own SimPhone, and its own real WebSocket to the relay.
//
// Each phone is the reference agent (DeviceAgent) serving the real tool surface
// (createPhoneServer) — nothing is simplified for the fleet. What is shared is what can be:
// code, the surface's tool list and schema validator (see src/device/tools/server.ts), and
// one keep-alive HTTP agent per source address for the challenge POSTs. Timers are per phone,
// but Node keeps all timers of one duration in one list behind one libuv timer, so the ping
// timers of a thousand phones (they all start at 60 s and grow alike) cost one list entry each.
//
//   npx tsx loadtest/fleet.ts --relay http://127.0.0.1:8080 --count 100 [--data-dir DIR]
//
// API: startFleet({ relayUrl, count, pairing, stateRoot?, concurrency }) → Fleet.
import { mkdtempSync } from 'node:fs';
import { request as httpRequest, Agent as HttpAgent } from 'node:http';
import { request as httpsRequest, Agent as HttpsAgent } from 'node:https';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { execFile } from 'node:child_process';
import { parseArgs } from 'node:util';
import { fileURLToPath } from 'node:url';
import {
  DeviceAgent,
  PairingError,
  loadIdentity,
  silentLogger,
  stderrLogger,
  type AgentLogger,
  type BackoffOptions,
  type PingOptions,
  type QrPayload,
  type StopInfo,
} from '../src/device/agent/index.ts';
import { SimPhone } from '../src/device/sim/model.ts';
import { createPhoneServer, type PhoneServerOptions } from '../src/device/tools/index.ts';

export interface FleetOptions {
  /** Only used to check the pairing payloads point where we expect; each phone keeps its own. */
  relayUrl: string;
  count: number;
  /** A fresh QR payload for phone i (called only for phones whose state dir is not paired yet). */
  pairing: (i: number) => Promise<QrPayload | string>;
  /** Parent of the per-phone state dirs (phone-0000 …). Default: a new temp dir. Reusing one skips pairing. */
  stateRoot?: string;
  /** Phones pairing or making their first connection at once. Default 50. */
  concurrency?: number;
  /** Per phone: the agent's reconnect backoff (default: the agent's own defaults). */
  backoff?: BackoffOptions;
  pingIntervals?: PingOptions;
  drainJitterMs?: number;
  /**
   * Local addresses for the phones' HTTP requests (pair, challenge), assigned round robin,
   * e.g. 127.0.0.2 … 127.0.0.51. The relay limits challenges per address
   * (CHALLENGES_PER_MINUTE in src/gateway/device-socket.ts); real phones come from many addresses, so a big fleet on one host would
   * otherwise be throttled by a limit meant for a single abuser. Default: the OS picks.
   */
  sourceAddresses?: string[];
  /** SimPhone seed of phone i is seedBase + i. Default 1. */
  seedBase?: number;
  /** Passed to every phone's createPhoneServer (leaseTtlMs, runStepDelayMs, …). */
  server?: Omit<PhoneServerOptions, 'phone' | 'deviceId'>;
  /** How long startFleet waits for each phone's first connection. Default 30 000. */
  connectTimeoutMs?: number;
  /** The agents' timeout for the challenge POST and the WebSocket handshake. Default: the agent's (15 s). */
  requestTimeoutMs?: number;
  /**
   * Timeout of one /pair POST. The agent asks again with the same code (three tries); a pairing
   * that still fails without a refusal is retried (twice) with a fresh code. Default 10 000.
   */
  pairTimeoutMs?: number;
  /** Called as each phone's HTTP request (pair, challenge) leaves, before any answer: what the relay is asked, when. */
  onRequest?: (index: number, url: string, at: number) => void;
  log?: AgentLogger;
  /** Called on every successful connection of any phone (relay-side work is done by then too, almost). */
  onConnected?: (phone: FleetPhone, at: number) => void;
}

export interface FleetPhone {
  index: number;
  deviceId: string;
  stateDir: string;
  agent: DeviceAgent;
  sim: SimPhone;
  connects: number;
  lastConnectedAt: number | undefined;
  stopped: StopInfo | undefined;
}

export interface FleetStats {
  count: number;
  connected: number;
  connects: number;
  disconnects: number;
  /** Reconnect attempts scheduled (after a failure or a drop). */
  retries: number;
  stopped: number;
  pairMs: number;
  startMs: number;
}

export interface Fleet {
  phones: FleetPhone[];
  stateRoot: string;
  stats(): FleetStats;
  /** Resolves once `n` phones are connected; rejects after timeoutMs. */
  waitConnected(n: number, timeoutMs: number): Promise<void>;
  stop(): Promise<void>;
}

export const phoneDirName = (i: number) => `phone-${String(i).padStart(5, '0')}`;

/** Runs `fn` over 0..count-1 with at most `limit` at once; rejects with the first error. */
export async function pool(count: number, limit: number, fn: (i: number) => Promise<void>): Promise<void> {
  let next = 0;
  const worker = async () => {
    while (next < count) await fn(next++);
  };
  await Promise.all(Array.from({ length: Math.max(1, Math.min(limit, count)) }, worker));
}

/**
 * A minimal fetch for the agent's JSON POSTs (pair, challenge) from one local address. Like
 * the agent's own client it opens a connection per request: a pooled one could lead to a
 * relay node that has since gone away. (Undici, behind the global fetch, cannot choose a
 * source address without its own package; node:http can.)
 */
export function boundFetch(localAddress: string | undefined): typeof fetch {
  const agents = {
    'http:': new HttpAgent({ keepAlive: false, localAddress }),
    'https:': new HttpsAgent({ keepAlive: false, localAddress }),
  };
  return async (input: string | URL | Request, init: RequestInit = {}) => {
    const url = new URL(typeof input === 'string' || input instanceof URL ? input : input.url);
    const send = url.protocol === 'https:' ? httpsRequest : httpRequest;
    const body = typeof init.body === 'string' ? init.body : '';
    return await new Promise<Response>((resolve, reject) => {
      const req = send(url, {
        method: init.method ?? 'GET',
        headers: { ...(init.headers as Record<string, string>), 'content-length': String(Buffer.byteLength(body)) },
        agent: agents[url.protocol as 'http:' | 'https:'],
        signal: init.signal ?? undefined,
      });
      req.on('error', reject);
      req.on('response', (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('error', reject);
        res.on('end', () =>
          resolve(new Response(Buffer.concat(chunks).toString('utf8'), { status: res.statusCode ?? 0 })),
        );
      });
      req.end(body);
    });
  };
}

/** Most of `sorted` (times in ms, ascending) inside any 100 ms window (sliding). */
export function maxIn100ms(sorted: number[]): number {
  let best = 0;
  for (let i = 0, j = 0; i < sorted.length; i++) {
    while (sorted[i] - sorted[j] >= 100) j++;
    best = Math.max(best, i - j + 1);
  }
  return best;
}

/** "127.0.0.2-127.0.0.51" or "a,b,c" → list of addresses. */
export function parseAddresses(spec: string): string[] {
  const range = /^(\d+\.\d+\.\d+\.)(\d+)-\1(\d+)$/.exec(spec);
  if (range) {
    const out: string[] = [];
    for (let i = Number(range[2]); i <= Number(range[3]) && out.length < 256; i++) out.push(`${range[1]}${i}`);
    return out;
  }
  return spec
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
}

export async function startFleet(opts: FleetOptions): Promise<Fleet> {
  const stateRoot = opts.stateRoot ?? mkdtempSync(join(tmpdir(), 'pb-fleet-'));
  const concurrency = opts.concurrency ?? 50;
  const log = opts.log ?? silentLogger;
  const fetchers = (opts.sourceAddresses ?? []).map(boundFetch);
  const onRequest = opts.onRequest;
  const plain = onRequest && !fetchers.length ? boundFetch(undefined) : undefined;
  const fetchFor = (i: number): typeof fetch | undefined => {
    const base = fetchers.length ? fetchers[i % fetchers.length] : plain;
    if (!base || !onRequest) return base;
    return (input: string | URL | Request, init?: RequestInit) => {
      onRequest(i, String(input instanceof Request ? input.url : input), Date.now());
      return base(input, init);
    };
  };
  const phones: FleetPhone[] = new Array<FleetPhone>(opts.count);
  const counters = { connects: 0, disconnects: 0, retries: 0, stopped: 0 };
  let connected = 0;
  const waiters = new Set<() => void>();
  const notify = () => {
    for (const w of waiters) w();
  };

  // Pairing first (each phone once; a reused stateRoot skips it), then connecting.
  const t0 = performance.now();
  await pool(opts.count, concurrency, async (i) => {
    const stateDir = join(stateRoot, phoneDirName(i));
    let identity = loadIdentity(stateDir);
    for (let attempt = 1; !identity || identity.removed_at; attempt++) {
      try {
        identity = await DeviceAgent.pair({
          stateDir,
          qr: await opts.pairing(i),
          name: `fleet-${i}`,
          fetchImpl: fetchFor(i),
          timeoutMs: opts.pairTimeoutMs ?? 10_000,
          log,
        });
      } catch (err) {
        // A refusal (bad code, plan limit, rate limit) is final; what the agent's own tries with
        // the same code did not get through is retried with a new code.
        if (err instanceof PairingError || attempt >= 3) throw err;
        log.warn(`phone ${i}: pairing attempt ${attempt} failed (${(err as Error).message}); retrying with a new code`);
      }
    }
    const sim = new SimPhone({ seed: (opts.seedBase ?? 1) + i });
    const deviceId = identity.device_id;
    const server = opts.server;
    const agent = new DeviceAgent({
      stateDir,
      createServer: () => createPhoneServer({ ...server, phone: sim, deviceId }),
      backoff: opts.backoff,
      pingIntervals: opts.pingIntervals,
      drainJitterMs: opts.drainJitterMs,
      requestTimeoutMs: opts.requestTimeoutMs,
      fetchImpl: fetchFor(i),
      log,
    });
    phones[i] = {
      index: i,
      deviceId,
      stateDir,
      agent,
      sim,
      connects: 0,
      lastConnectedAt: undefined,
      stopped: undefined,
    };
  });
  const pairMs = performance.now() - t0;

  for (const phone of phones) {
    const { agent } = phone;
    agent.on('connected', () => {
      const at = Date.now();
      phone.connects++;
      phone.lastConnectedAt = at;
      counters.connects++;
      connected++;
      opts.onConnected?.(phone, at);
      notify();
    });
    agent.on('disconnected', () => {
      counters.disconnects++;
      connected--;
    });
    agent.on('reconnecting', () => counters.retries++);
    agent.on('stopped', (info) => {
      phone.stopped = info;
      counters.stopped++;
      notify();
    });
  }

  const t1 = performance.now();
  const connectTimeoutMs = opts.connectTimeoutMs ?? 30_000;
  const stopAll = () =>
    pool(phones.length, 200, async (i) => {
      await phones[i]?.agent.stop();
    });
  await pool(opts.count, concurrency, async (i) => {
    const { agent } = phones[i];
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(
        () => reject(new Error(`phone ${i} did not connect within ${connectTimeoutMs} ms`)),
        connectTimeoutMs,
      );
      const done = () => {
        clearTimeout(timer);
        agent.off('connected', done);
        agent.off('stopped', stopped);
        resolve();
      };
      const stopped = (info: StopInfo) => {
        clearTimeout(timer);
        agent.off('connected', done);
        reject(new Error(`phone ${i} stopped: ${info.message}`));
      };
      agent.on('connected', done);
      agent.once('stopped', stopped);
      agent.start();
    });
  }).catch(async (err: unknown) => {
    await stopAll();
    throw err;
  });
  const startMs = performance.now() - t1;

  return {
    phones,
    stateRoot,
    stats: () => ({
      count: opts.count,
      connected,
      ...counters,
      pairMs: Math.round(pairMs),
      startMs: Math.round(startMs),
    }),
    waitConnected(n, timeoutMs) {
      return new Promise<void>((resolve, reject) => {
        const check = () => {
          if (connected >= n) finish();
          else if (counters.stopped > opts.count - n)
            fail(new Error(`${counters.stopped} phones stopped for good; ${n} cannot connect`));
        };
        const finish = () => {
          clearTimeout(timer);
          waiters.delete(check);
          resolve();
        };
        const fail = (err: Error) => {
          clearTimeout(timer);
          waiters.delete(check);
          reject(err);
        };
        const timer = setTimeout(
          () => fail(new Error(`only ${connected} of ${n} phones connected within ${timeoutMs} ms`)),
          timeoutMs,
        );
        waiters.add(check);
        check();
      });
    },
    stop: stopAll,
  };
}

// ---- CLI ------------------------------------------------------------------------

const USAGE = `npx tsx loadtest/fleet.ts --relay URL --count N [options]

  --relay URL             the relay's public URL (what QR payloads carry)
  --count N               simulated phones
  --state-root DIR        where the phones' keys live (reuse it to skip pairing next time)
  --concurrency C         phones pairing/connecting at once (50)
  --data-dir DIR          the relay's data dir: create the codes in its store as \`phonebridge pair\`
                          does, all up front in this process (fast); the relay must be serving DIR
  --pair-cmd "CMD"        else: run CMD once per unpaired phone, one at a time; it prints a QR payload
                          line (default: phonebridge pair --json, ~1–6 s each: fine for a few phones)
  --source-addresses A    127.0.0.2-127.0.0.51 or a,b,c: local addresses for the phones' HTTP requests
  --stats-every S         print a JSON stats line every S seconds (10)`;

function runPairCommand(cmd: string): Promise<QrPayload> {
  return new Promise((resolve, reject) => {
    execFile('/bin/sh', ['-c', cmd], { timeout: 120_000, maxBuffer: 1 << 20 }, (err, stdout, stderr) => {
      if (err) return reject(new Error(`${cmd} failed: ${stderr || err.message}`));
      const line = stdout
        .split('\n')
        .map((l) => l.trim())
        .find((l) => l.startsWith('{'));
      if (!line) return reject(new Error(`${cmd} printed no QR payload`));
      resolve(JSON.parse(line) as QrPayload);
    });
  });
}

async function cli(argv: string[]): Promise<void> {
  const { values } = parseArgs({
    args: argv,
    options: {
      relay: { type: 'string' },
      count: { type: 'string' },
      'state-root': { type: 'string' },
      concurrency: { type: 'string' },
      'data-dir': { type: 'string' },
      'pair-cmd': { type: 'string' },
      'source-addresses': { type: 'string' },
      'stats-every': { type: 'string' },
      help: { type: 'boolean' },
    },
  });
  if (values.help || !values.relay || !values.count) {
    console.error(USAGE);
    process.exit(values.help ? 0 : 64);
  }
  const count = Number(values.count);
  if (!Number.isInteger(count) || count < 1) throw new Error('--count must be a positive integer');
  const stateRoot = values['state-root'] ?? mkdtempSync(join(tmpdir(), 'pb-fleet-'));
  const unpaired = Array.from({ length: count }, (_, i) => i).filter((i) => {
    const id = loadIdentity(join(stateRoot, phoneDirName(i)));
    return !id || id.removed_at;
  }).length;
  let pairing: (i: number) => Promise<QrPayload>;
  if (values['data-dir'] && unpaired > 0) {
    // All codes first, on one connection, then the store is closed before any phone pairs: the
    // embedded store is shared with the relay through its socket, and this process should not
    // be querying it while the relay redeems codes (see the report on pglite-socket).
    const { openStore } = await import('../src/store/index.ts');
    const { createPairing } = await import('../src/provisioning.ts');
    const opened = await openStore({ dataDir: values['data-dir'], role: 'cli', poolMax: 1 });
    const codes: QrPayload[] = [];
    try {
      const spares = Math.ceil(unpaired * 0.05) + 3; // for pairings whose answer is lost and retried
      for (let i = 0; i < unpaired + spares; i++)
        codes.push(await createPairing(opened.store, { relay: values.relay, name: null }));
    } finally {
      await opened.close();
    }
    // eslint-disable-next-line @typescript-eslint/require-await -- async so running out is a rejection, as from the relay
    pairing = async () => {
      const qr = codes.shift();
      if (!qr) throw new Error('ran out of pairing codes');
      return qr;
    };
  } else {
    // One \`phonebridge pair --json\` at a time: each opens the relay's store for itself.
    const bin = fileURLToPath(new URL('../bin/phonebridge.mjs', import.meta.url));
    const cmd = values['pair-cmd'] ?? `node ${bin} pair --json`;
    let queue = Promise.resolve();
    pairing = () => {
      const next = queue.then(() => runPairCommand(cmd));
      queue = next.then(
        () => undefined,
        () => undefined,
      );
      return next;
    };
  }
  const fleet = await startFleet({
    relayUrl: values.relay,
    count,
    pairing,
    stateRoot,
    concurrency: values.concurrency ? Number(values.concurrency) : undefined,
    sourceAddresses: values['source-addresses'] ? parseAddresses(values['source-addresses']) : undefined,
    log: count <= 10 ? stderrLogger : silentLogger,
  });
  const mem = () => {
    const m = process.memoryUsage();
    return { rssMiB: Math.round(m.rss / 2 ** 20), heapMiB: Math.round(m.heapUsed / 2 ** 20) };
  };
  console.log(JSON.stringify({ ready: true, stateRoot: fleet.stateRoot, ...fleet.stats(), ...mem() }));
  const every = Number(values['stats-every'] ?? 10) * 1000;
  const timer = setInterval(
    () => console.log(JSON.stringify({ at: new Date().toISOString(), ...fleet.stats(), ...mem() })),
    every,
  );
  const shutdown = async () => {
    clearInterval(timer);
    await fleet.stop();
    console.log(JSON.stringify({ done: true, ...fleet.stats() }));
    process.exit(0);
  };
  process.once('SIGINT', () => void shutdown());
  process.once('SIGTERM', () => void shutdown());
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  cli(process.argv.slice(2)).catch((err) => {
    console.error(`fleet: ${(err as Error).message}`);
    process.exit(1);
  });
}
