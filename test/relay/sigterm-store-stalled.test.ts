// docs/OPERATIONS.md, "Node lifecycle and failures": on SIGTERM the node exits
// (0) once its clients' requests are answered — "or at `--drain-ms`". The chart relies on it:
// terminationGracePeriodSeconds = ceil(drainMs/1000) + preStop sleep (5 s) + 10 s, "so a draining
// node always finishes and exits 0 before Kubernetes would kill it" (the preStop sleep runs
// before SIGTERM, so the node has ceil(drainMs/1000) + 10 s after it).
// Here Postgres stops answering (no close: Toxiproxy's timeout toxic, the fault table's "Postgres
// stops answering") while a phone is connected. The drain itself is quick (nothing in flight);
// closing the node writes the phones' last-seen times (src/gateway/node.ts close()) and then
// closes the store's pool (services/serve.ts stop()): each is bounded, so neither waits out the
// store's 15 s query timeout.
import { afterAll, expect, it } from 'vitest';
import { rmSync } from 'node:fs';
import { tempDir, connectClient } from '../helpers/relay.ts';
import { startChild, type Child } from '../helpers/processes.ts';
import { startToxiproxy, type Toxiproxy } from '../helpers/toxiproxy.ts';
import { createDatabase } from '../cluster/harness.ts';
import { openStore } from '../../src/store/index.ts';
import { createKey, createPairing } from '../../src/provisioning.ts';
import { DeviceAgent, silentLogger } from '../../src/device/agent/index.ts';
import { createEchoServer } from '../fixtures/echo-server.ts';

const children: Child[] = [];
const dirs: string[] = [];
const agents: DeviceAgent[] = [];
let tp: Toxiproxy | undefined;
let db: { url: string; drop(): Promise<void> } | undefined;
afterAll(async () => {
  for (const a of agents) await a.stop().catch(() => {});
  await Promise.all(children.map((c) => c.kill('SIGKILL')));
  await tp?.stop();
  await db?.drop().catch(() => {});
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
}, 60_000);

const DRAIN_MS = 1000;
/** The slack allowed past --drain-ms: half the chart's margin (10 s). */
const SLACK_MS = 5000;

it('SIGTERM while Postgres does not answer: the node exits 0 at --drain-ms, not after a store query times out', async () => {
  db = await createDatabase();
  tp = await startToxiproxy();
  const proxy = await tp.proxy('pg', '127.0.0.1:5432');
  const data = tempDir('pb-rv-drain-');
  dirs.push(data);
  const serve = startChild([
    'serve',
    '--port',
    '0',
    '--admin-port',
    '0',
    '--data-dir',
    data,
    '--database-url',
    proxy.through(db.url),
    '--drain-ms',
    String(DRAIN_MS),
  ]);
  children.push(serve);
  const ready = await serve.ready;
  const url = `http://127.0.0.1:${ready.port}`;

  // A phone and a key, written straight into Postgres (not through the proxy).
  const direct = await openStore({ dataDir: data, databaseUrl: db.url, role: 'cli' });
  const qr = await createPairing(direct.store, { relay: url });
  const stateDir = tempDir('pb-rv-phone-');
  dirs.push(stateDir);
  const id = await DeviceAgent.pair({ stateDir, qr, name: 'p', log: silentLogger });
  const agent = new DeviceAgent({ stateDir, createServer: () => createEchoServer(), log: silentLogger });
  agents.push(agent);
  const up = new Promise<void>((r) => agent.once('connected', () => r()));
  agent.start();
  await up;
  const key = await createKey(direct.store, id.device_id);
  await direct.close();
  const { client } = await connectClient(`${url}/mcp`, key.token);
  await client.callTool({ name: 'echo', arguments: { text: 'hi' } });
  await client.close();

  // Postgres stops answering; the node notices (store.up false) and keeps serving.
  await proxy.add({ type: 'timeout', attributes: { timeout: 0 } }, { stream: 'upstream' });
  await proxy.add({ type: 'timeout', attributes: { timeout: 0 } }, { stream: 'downstream' });
  const admin = `http://127.0.0.1:${ready.adminPort}`;
  for (let i = 0; i < 100; i++) {
    const r = (await (await fetch(`${admin}/readyz`)).json()) as { store: { up: boolean } };
    if (!r.store.up) break;
    await new Promise((res) => setTimeout(res, 100));
  }

  const t0 = Date.now();
  serve.proc.kill('SIGTERM');
  const killer = setTimeout(() => serve.proc.kill('SIGKILL'), 60_000);
  const exit = await serve.exited;
  clearTimeout(killer);
  const took = Date.now() - t0;
  expect(exit.code, 'exit code after the drain').toBe(0);
  expect(
    took,
    `SIGTERM → exit took ${took} ms with --drain-ms ${DRAIN_MS} (the chart gives ceil(drainMs/1000) + 10 s = 11 s after SIGTERM before SIGKILL)`,
  ).toBeLessThanOrEqual(DRAIN_MS + SLACK_MS);
}, 150_000);
