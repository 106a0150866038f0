// A real relay (the same startRelay as `phonebridge serve`) in a child process, with an IPC
// control channel for fleet tests and benches: pairing codes and keys in bulk (what
// `phonebridge pair` / `keys create` do, without a process per code), and the relay's own view
// of its phone sockets (when each connected). Being a child, it can be killed for real.
//
//   fork('loadtest/fleet-relay.ts', ['--port', '0', '--data-dir', DIR], { execArgv: ['--import', 'tsx'] })
//   → { type: 'ready', port, url }   then answers requests { id, op, … } with { id, ok, result | error }.
import { fork, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { mainThreadCpuMs } from './lib/proc-cpu.ts';
import { parseRelayConfig } from '../src/config.ts';
import { createLogger } from '../src/log.ts';
import type { Scope } from '../src/store/types.ts';
import type { QrPayload } from '../src/device/agent/index.ts';

export type RelayRequest =
  | { op: 'pair'; count: number }
  | { op: 'keys'; deviceIds: string[]; scopes?: Scope[] }
  | { op: 'connections' }
  | { op: 'devices'; count: number; publicKey: string }
  | { op: 'stats' }
  | { op: 'profile'; label: string }
  | { op: 'cpu' }
  | { op: 'stop' };

/** What the child sends back: `ready` once, then one answer per request id. */
type ChildMessage =
  | { type: 'ready'; port: number; url: string; id?: undefined }
  | { id: number; ok: true; result: unknown }
  | { id: number; ok: false; error: string };

/** The relay's own view of itself, for load tests: memory after GC, sockets, pending state. */
export interface RelayStats {
  rss: number;
  heapUsed: number;
  external: number;
  arrayBuffers: number;
  /** Whether the numbers above were taken after a full GC (the child runs with --expose-gc). */
  afterGc: boolean;
  devices: number;
  initialized: number;
  /** Requests waiting for a phone's answer on this node (local sockets and the router). */
  pending: number;
  sseStreams: number;
  /** libuv handles and requests by kind (Timeout, TCPSocketWrap, …). */
  handles: Record<string, number>;
  /** CPU time the relay process has used (user + system), ms: what it cost, whatever shared the cores. */
  cpuMs: number;
  /** The kernel's part of cpuMs (syscalls, and loopback TCP work done on the relay's behalf). */
  cpuSystemMs: number;
  /** The accept path's store work so far (src/gateway/device-batch.ts): key lookups and last-seen writes, and what they carried. */
  deviceStore: { keyQueries: number; keyIds: number; seenWrites: number; seenRows: number };
}

export interface RelayConnectionInfo {
  deviceId: string;
  connectedAt: number;
  initialized: boolean;
}

/** The parent's handle on a relay child. */
export interface RelayChild {
  child: ChildProcess;
  port: number;
  url: string;
  mcpUrl: string;
  pair(count: number): Promise<QrPayload[]>;
  keys(deviceIds: string[], scopes?: Scope[]): Promise<Array<{ id: string; token: string }>>;
  connections(): Promise<RelayConnectionInfo[]>;
  /** Registers `count` devices with one public key straight in the store (what /pair does, without HTTP). */
  devices(count: number, publicKey: string): Promise<string[]>;
  stats(): Promise<RelayStats>;
  /** CPU time used so far, ms (no GC first, unlike stats). */
  cpu(): Promise<{ cpuMs: number; cpuSystemMs: number; mainThreadCpuMs?: number }>;
  /**
   * With PHONEBRIDGE_LOADTEST_RELAY_PROFILE_DIR set, the relay profiles its CPU from start-up:
   * this writes what it has so far to DIR/<label>-<pid>.cpuprofile and starts afresh (so a
   * window such as one storm round is profiled, also on a node killed afterwards). Resolves
   * with the file, or null when not profiling.
   */
  profile(label: string): Promise<string | null>;
  /** SIGKILL: no drain, no close frames; phones see their sockets drop (1006). */
  kill(): Promise<void>;
  /** Graceful stop (phones get 1012), then the process exits. */
  stop(): Promise<void>;
}

const SELF = fileURLToPath(import.meta.url);

export function startRelayChild(
  flags: string[],
  opts: { startTimeoutMs?: number; env?: NodeJS.ProcessEnv; execArgv?: string[]; execPath?: string } = {},
): Promise<RelayChild> {
  const child = fork(SELF, flags, {
    execArgv: ['--import', 'tsx', ...(opts.execArgv ?? [])],
    ...(opts.execPath ? { execPath: opts.execPath } : {}),
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
    env: { ...process.env, ...opts.env },
  });
  let nextId = 1;
  const pending = new Map<number, { resolve: (v: unknown) => void; reject: (e: Error) => void }>();
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  child.on('message', (message) => {
    const m = message as ChildMessage | undefined;
    if (m?.id === undefined) return;
    const p = pending.get(m.id);
    if (!p) return;
    pending.delete(m.id);
    if (m.ok) p.resolve(m.result);
    else p.reject(new Error(m.error));
  });
  child.once('exit', (code, signal) => {
    for (const p of pending.values()) p.reject(new Error(`relay child exited (${code ?? signal})`));
    pending.clear();
  });
  const request = <T>(req: RelayRequest, timeoutMs = 120_000): Promise<T> =>
    new Promise<T>((resolve, reject) => {
      const id = nextId++;
      const timer = setTimeout(() => {
        pending.delete(id);
        reject(new Error(`relay child: ${req.op} timed out`));
      }, timeoutMs);
      pending.set(id, {
        resolve: (v) => (clearTimeout(timer), resolve(v as T)),
        reject: (e) => (clearTimeout(timer), reject(e)),
      });
      child.send({ id, ...req });
    });

  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error('relay child did not start in time'));
    }, opts.startTimeoutMs ?? 60_000);
    child.once('exit', (code, signal) => {
      clearTimeout(timer);
      reject(new Error(`relay child exited before it was ready (${code ?? signal})`));
    });
    child.on('message', function ready(message) {
      const m = message as ChildMessage | undefined;
      if (m?.id !== undefined || m?.type !== 'ready') return;
      clearTimeout(timer);
      child.off('message', ready);
      resolve({
        child,
        port: m.port,
        url: m.url,
        mcpUrl: `${m.url}/mcp`,
        pair: (count) => request({ op: 'pair', count }),
        keys: (deviceIds, scopes) => request({ op: 'keys', deviceIds, scopes }),
        connections: () => request({ op: 'connections' }),
        devices: (count, publicKey) => request({ op: 'devices', count, publicKey }, 600_000),
        stats: () => request({ op: 'stats' }),
        profile: (label) => request({ op: 'profile', label }),
        cpu: () => request({ op: 'cpu' }),
        async kill() {
          if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
          await exited;
        },
        async stop() {
          if (child.exitCode !== null || child.signalCode !== null) return;
          await request({ op: 'stop' }).catch(() => {});
          await Promise.race([exited, new Promise((r) => setTimeout(r, 10_000))]);
          if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
          await exited;
        },
      });
    });
  });
}

// ---- the child ------------------------------------------------------------------

async function childMain(argv: string[]): Promise<void> {
  const { startRelay } = await import('../services/serve.ts');
  const { createKey, createPairing } = await import('../src/provisioning.ts');
  const config = parseRelayConfig(['--admin-port', '0', '--log-level', 'silent', ...argv], {});
  // As `serve` does: traced only when the OTEL_* variables ask (docs/OPERATIONS.md, "Traces").
  await (await import('../src/observability/tracing.ts')).startRelayTracing(config.nodeId);
  const relay = await startRelay(config, createLogger({ level: config.logLevel }));
  const store = relay.store.store;
  const profileDir = process.env.PHONEBRIDGE_LOADTEST_RELAY_PROFILE_DIR;
  const { Session } = await import('node:inspector/promises');
  const profiler = profileDir ? new Session() : undefined;
  // With PHONEBRIDGE_LOADTEST_RELAY_HEAP_PROFILE=1 as well: a sampling heap profile per window
  // (DIR/<label>-<pid>.heapprofile), counting objects the GC has collected since, so it shows
  // what a window allocated, not only what it kept. With `=promoted`: only what outlived a
  // scavenge (kept, or collected by a full collection since), the objects that make
  // scavenges slow and full collections necessary.
  const heapMode = process.env.PHONEBRIDGE_LOADTEST_RELAY_HEAP_PROFILE;
  const heapSampling = !!profileDir && (heapMode === '1' || heapMode === 'promoted');
  const startHeapSampling = () =>
    profiler!.post('HeapProfiler.startSampling', {
      samplingInterval: 8192,
      includeObjectsCollectedByMajorGC: true,
      includeObjectsCollectedByMinorGC: heapMode !== 'promoted',
    } as never);
  if (profiler) {
    profiler.connect();
    await profiler.post('Profiler.enable');
    await profiler.post('Profiler.start');
    if (heapSampling) await startHeapSampling();
  }
  // eslint-disable-next-line @typescript-eslint/no-misused-promises -- the handler catches its own errors and answers them over IPC
  process.on('message', async (message) => {
    const m = message as RelayRequest & { id: number };
    const answer = (result: unknown) => process.send!({ id: m.id, ok: true, result });
    try {
      switch (m.op) {
        case 'pair': {
          const out: QrPayload[] = [];
          for (let i = 0; i < m.count; i++)
            out.push(
              await createPairing(store, { relay: config.publicUrl, name: `fleet-${i}`, fp: relay.node.fingerprint }),
            );
          return answer(out);
        }
        case 'keys': {
          const out = [];
          for (const id of m.deviceIds) out.push(await createKey(store, id, m.scopes));
          return answer(out.map((k) => ({ id: k.id, token: k.token })));
        }
        case 'connections':
          return answer(
            [...relay.node.ctx.hub.connections()].map((c) => ({
              deviceId: c.deviceId,
              connectedAt: c.connectedAt,
              initialized: !!c.initResult,
            })),
          );
        case 'devices': {
          const { hashPairingCode, newId } = await import('../src/crypto/secrets.ts');
          const ids: string[] = new Array(m.count);
          let next = 0;
          const worker = async () => {
            while (next < m.count) {
              const i = next++;
              const qr = await createPairing(store, { relay: config.publicUrl, name: null });
              const r = await store.redeemPairingCode({
                codeHash: hashPairingCode(qr.code),
                deviceId: newId('dev'),
                publicKey: m.publicKey,
                name: `load-${i}`,
                now: new Date(),
              });
              if (!r.ok) throw new Error(`registering device ${i}: ${r.error}`);
              ids[i] = r.device.id;
            }
          };
          await Promise.all(Array.from({ length: Math.min(8, m.count) }, worker));
          return answer(ids);
        }
        case 'stats': {
          const cpu = process.cpuUsage(); // before the GCs below, which are ours, not the relay's
          const gc = (globalThis as { gc?: () => void }).gc;
          gc?.();
          gc?.();
          const mem = process.memoryUsage();
          const conns = [...relay.node.ctx.hub.connections()];
          const handles: Record<string, number> = {};
          for (const h of process.getActiveResourcesInfo()) handles[h] = (handles[h] ?? 0) + 1;
          const { metrics } = await import('../src/metrics.ts');
          const stats: RelayStats = {
            rss: mem.rss,
            heapUsed: mem.heapUsed,
            external: mem.external,
            arrayBuffers: mem.arrayBuffers,
            afterGc: !!gc,
            devices: conns.length,
            initialized: conns.filter((c) => c.initResult !== undefined).length,
            pending: conns.reduce((n, c) => n + c.inFlight, 0) + relay.node.ctx.router.inFlight,
            sseStreams: (await metrics.sseStreams.get()).values[0]?.value ?? 0,
            handles,
            cpuMs: (cpu.user + cpu.system) / 1000,
            cpuSystemMs: cpu.system / 1000,
            deviceStore: {
              keyQueries: relay.node.ctx.devices.keys.counts.queries,
              keyIds: relay.node.ctx.devices.keys.counts.ids,
              seenWrites: relay.node.ctx.devices.seen.counts.writes,
              seenRows: relay.node.ctx.devices.seen.counts.rows,
            },
          };
          return answer(stats);
        }
        case 'cpu': {
          const cpu = process.cpuUsage();
          return answer({
            cpuMs: (cpu.user + cpu.system) / 1000,
            cpuSystemMs: cpu.system / 1000,
            mainThreadCpuMs: mainThreadCpuMs(),
          });
        }
        case 'profile': {
          if (!profiler || !profileDir) return answer(null);
          const { profile } = await profiler.post('Profiler.stop');
          const { writeFileSync } = await import('node:fs');
          const file = `${profileDir}/${m.label.replace(/[^\w.-]/g, '_')}-${process.pid}.cpuprofile`;
          writeFileSync(file, JSON.stringify(profile));
          if (heapSampling) {
            const { profile: heap } = await profiler.post('HeapProfiler.stopSampling');
            writeFileSync(file.replace(/\.cpuprofile$/, '.heapprofile'), JSON.stringify(heap));
            await startHeapSampling();
          }
          await profiler.post('Profiler.start');
          return answer(file);
        }
        case 'stop':
          answer(true);
          await relay.node.drain();
          await relay.stop();
          process.exit(0);
      }
    } catch (err) {
      process.send!({ id: m.id, ok: false, error: (err as Error).message });
    }
  });
  process.on('disconnect', () => process.exit(0)); // the parent went away
  process.send!({ type: 'ready', port: relay.node.port, url: config.publicUrl });
}

if (process.argv[1] === SELF && process.send) {
  childMain(process.argv.slice(2)).catch((err) => {
    console.error(`fleet-relay: ${(err as Error).stack ?? err}`);
    process.exit(1);
  });
}
