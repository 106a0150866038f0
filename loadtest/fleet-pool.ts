// fleet: a fleet run as an orchestrator sees it. Two nodes over Redis and Postgres; --phones
// light phones (default 5,000) are enrolled with ONE enrollment code through /pair (labelled
// site=berlin by the code, names rack-<n>), spread over a few source addresses, and connect to
// both nodes; then 200 orchestrator loops, each with its own fleet key, allocate a phone
// (POST /api/v1/allocations), call it on /mcp/devices/<id> with the allocation header (the
// stateless revision: no session), and release it, for --duration seconds.
// Reports allocations/s, allocation latency p50/p99, call latency, errors, and the enrollment rate.
//   npm run loadtest -- fleet [--phones 5000] [--duration 60]
import { request, Agent } from 'node:http';
import { createPrivateKey, randomUUID, type KeyObject } from 'node:crypto';
import { connectPhones, pool } from './lib/phones.ts';
import { keepAliveAgents, loadSurface, loopbackAddresses } from './lib/light-phone.ts';
import { oneRedisUrl, startRelays } from './lib/relay.ts';
import type { Scenario, ScenarioContext } from './lib/scenario.ts';
import { generateDeviceKey } from '../src/crypto/device-auth.ts';
import { openStore } from '../src/store/index.ts';
import { createEnrollment } from '../src/fleet/enroll.ts';
import { createFleetKey } from '../src/fleet/keys.ts';
import { SCOPES } from '../src/store/types.ts';
import { PAIR_FAILURE_LIMIT } from '../src/gateway/pairing.ts';
import { openFileLimit } from './lib/limits.ts';

const LOOPS = 200;
/** Source addresses the enrollment spreads over (a handful of NATs; each is gated per address). */
const ENROLL_ADDRESSES = 40;

interface Reply {
  status: number;
  json: any;
}

function httpJson(
  url: string,
  method: string,
  headers: Record<string, string>,
  body: unknown,
  agent: Agent,
  retries = 1,
): Promise<Reply> {
  return new Promise((resolve, reject) => {
    const data = body === undefined ? undefined : JSON.stringify(body);
    const req = request(
      url,
      {
        method,
        agent,
        timeout: 120_000,
        headers: {
          ...(data ? { 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(data)) } : {}),
          ...headers,
        },
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('error', reject);
        res.on('end', () => {
          const text = Buffer.concat(chunks).toString('utf8');
          let json: any;
          try {
            // A slow answer comes as an SSE stream (src/gateway/mcp-stateless.ts): its last message.
            const datas = String(res.headers['content-type']).includes('text/event-stream')
              ? [...text.matchAll(/^data: (.*)$/gm)].map((x) => x[1])
              : [];
            json = datas.length ? JSON.parse(datas[datas.length - 1]) : text ? JSON.parse(text) : undefined;
          } catch {
            json = text;
          }
          resolve({ status: res.statusCode ?? 0, json });
        });
      },
    );
    req.on('timeout', () => req.destroy(new Error(`${method} ${url} timed out`)));
    req.on('error', (err: NodeJS.ErrnoException) => {
      // A keep-alive socket the server closed as this request went out on it (Node's documented
      // race, `request.reusedSocket`): the request never reached the relay; send it again.
      if (req.reusedSocket && err.code === 'ECONNRESET' && retries > 0)
        resolve(httpJson(url, method, headers, body, agent, retries - 1));
      else reject(err);
    });
    req.end(data);
  });
}

async function run(ctx: ScenarioContext): Promise<void> {
  const m = ctx.metrics;
  const phoneCount = Math.max(10, ctx.opts.phones ?? 5000);
  // Descriptors: this process holds every phone's socket plus the orchestrators' connections
  // (each relay node, its own process, holds about half the phones). Checked before anything starts.
  const fds = phoneCount + LOOPS * 2 + ENROLL_ADDRESSES * PAIR_FAILURE_LIMIT + 500;
  const limit = openFileLimit();
  if (limit !== undefined && fds > limit)
    throw new Error(
      `${phoneCount} phones need ~${fds} open files in the load generator, over its limit of ${limit} (ulimit -n): fewer --phones or a higher limit`,
    );
  ctx.setNote('two nodes: setup');
  const relays = await startRelays({ nodes: 2, redisUrl: oneRedisUrl(ctx.opts) });
  ctx.defer(() => relays.dispose());
  const dbFlag = relays.store.flags.indexOf('--database-url');
  if (dbFlag < 0) throw new Error('fleet needs Postgres (PHONEBRIDGE_TEST_DATABASE_URL)');
  const opened = await openStore({ databaseUrl: relays.store.flags[dbFlag + 1], dataDir: '', role: 'cli', poolMax: 4 });
  ctx.defer(() => opened.close());
  const store = opened.store;
  const [a, b] = relays.nodes;

  // --- Enrollment: one code, every phone through /pair ------------------------------------
  ctx.setNote(`enrolling ${phoneCount} phones with one code`);
  const enrollment = await createEnrollment(store, {
    accountId: 'local',
    maxPhones: phoneCount,
    expiresMs: 3600_000,
    labels: { site: 'berlin' },
    namePrefix: 'rack-',
    relay: a.url,
  });
  // A key per phone: one key is one phone, whose repeated pairing gets the same device back
  // (docs/decisions/0238-a-pairing-repeated-by-its-phone.md).
  const phoneKeys = Array.from({ length: phoneCount }, () => generateDeviceKey());
  const keyOf = new Map<string, KeyObject>();
  const addresses = loopbackAddresses(ENROLL_ADDRESSES);
  const agents = keepAliveAgents(addresses);
  const enrolled: string[] = [];
  const enrollErrors = m.counter('enroll_errors');
  const enrollTrend = m.trend('enroll_duration');
  const enrollStart = performance.now();
  let enrollFirstError = '';
  // As many pairings in flight as the pairing gate lets through (five per address): more would
  // only wait at the gate, polling the bus (docs/decisions/0173-enrollment.md).
  await pool(phoneCount, ENROLL_ADDRESSES * PAIR_FAILURE_LIMIT, async (i) => {
    const address = addresses[i % addresses.length];
    const t0 = performance.now();
    const r = await httpJson(
      `${(i % 2 ? b : a).url}/pair`,
      'POST',
      {},
      { code: enrollment.code, public_key: phoneKeys[i].publicKeySpkiBase64, name: 'light' },
      agents.get(address)!,
    ).catch((err: Error) => ({ status: 0, json: String(err) }));
    enrollTrend.add(performance.now() - t0);
    if (r.status === 200) {
      enrolled.push(r.json.device_id as string);
      keyOf.set(r.json.device_id as string, createPrivateKey(phoneKeys[i].privateKeyPem));
    } else {
      enrollErrors.add();
      enrollFirstError ||= `${r.status} ${JSON.stringify(r.json)}`;
    }
  });
  for (const ag of agents.values()) ag.destroy();
  const enrollS = (performance.now() - enrollStart) / 1000;
  ctx.figures.enrolled = enrolled.length;
  ctx.figures.enroll_per_s = Math.round(enrolled.length / enrollS);
  ctx.note(
    `enrolled ${enrolled.length}/${phoneCount} phones with one code in ${enrollS.toFixed(1)} s (${Math.round(enrolled.length / enrollS)}/s from ${addresses.length} source addresses)${enrollFirstError ? `; first error: ${enrollFirstError}` : ''}`,
  );

  // --- The phones connect, half to each node ----------------------------------------------
  ctx.setNote('connecting phones');
  const surface = loadSurface();
  const onCall: Parameters<typeof connectPhones>[0]['onCall'] = (call) =>
    void call.reply({ content: [{ type: 'text', text: 'ok' }] });
  const ids = [enrolled.filter((_, i) => i % 2 === 0), enrolled.filter((_, i) => i % 2 === 1)];
  let up = 0;
  ctx.setPhones(() => up);
  const fleets = [];
  for (const [n, node] of [a, b].entries()) {
    const share = ids[n];
    // The enrolled ids are registered already; connectPhones asks `devices` for ids to use.
    const fleet = await connectPhones({
      relay: { url: node.url, devices: () => Promise.resolve(share) },
      count: share.length,
      surface,
      onCall,
      concurrency: 200,
      keyFor: (id) => keyOf.get(id)!,
      onProgress: () => up++,
    });
    fleets.push(fleet);
    ctx.defer(() => fleet.closeAll());
  }

  // --- 200 orchestrators: allocate, call, release ----------------------------------------
  // One fleet key per orchestrator, minted a few at a time (the scenario's own pool is small).
  const keys: Array<{ token: string }> = [];
  await pool(LOOPS, 4, async () => {
    keys.push(await createFleetKey(store, { accountId: 'local', selector: 'site=berlin', scopes: [...SCOPES] }));
  });
  const allocations = m.counter('allocations');
  const allocTrend = m.trend('allocation_duration');
  const callTrend = m.trend('call_duration');
  const errors = m.rate('errors');
  const noPhone = m.counter('no_phone_free');
  const errorKinds = new Map<string, number>();
  const fail = (kind: string) => {
    errors.add(false);
    errorKinds.set(kind, (errorKinds.get(kind) ?? 0) + 1);
  };
  const agent = new Agent({ keepAlive: true, maxSockets: LOOPS * 2 });
  ctx.setNote(`${LOOPS} orchestrators`);
  ctx.beginLoad();
  await Promise.all(
    keys.map(async (key, i) => {
      const api = (i % 2 ? b : a).url;
      const auth = { authorization: `Bearer ${key.token}` };
      while (performance.now() < ctx.deadline) {
        const t0 = performance.now();
        const alloc = await httpJson(
          `${api}/api/v1/allocations`,
          'POST',
          auth,
          { selector: { site: 'berlin' }, ttl_s: 60 },
          agent,
        ).catch(() => ({ status: 0, json: undefined }));
        if (alloc.status === 409) {
          noPhone.add();
          continue;
        }
        if (alloc.status !== 201) {
          fail(`allocate ${alloc.status}`);
          continue;
        }
        allocTrend.add(performance.now() - t0);
        allocations.add();
        const t1 = performance.now();
        const call = await httpJson(
          alloc.json.mcp_url,
          'POST',
          {
            ...auth,
            accept: 'application/json, text/event-stream',
            'mcp-protocol-version': '2026-07-28',
            'mcp-method': 'tools/call',
            'mcp-name': 'echo',
            'x-phonebridge-allocation': alloc.json.id,
          },
          {
            jsonrpc: '2.0',
            id: randomUUID(),
            method: 'tools/call',
            params: {
              name: 'echo',
              arguments: { i },
              _meta: {
                'io.modelcontextprotocol/protocolVersion': '2026-07-28',
                'io.modelcontextprotocol/clientInfo': { name: 'orchestrator', version: '1' },
                'io.modelcontextprotocol/clientCapabilities': {},
              },
            },
          },
          agent,
        ).catch(() => ({ status: 0, json: undefined }));
        if (call.status === 200 && call.json?.result) {
          callTrend.add(performance.now() - t1);
          errors.add(true);
        } else
          fail(
            `call ${call.status} ${String(call.json?.error?.data?.code ?? call.json?.error?.message ?? call.json?.error ?? '')}`,
          );
        const rel = await httpJson(
          `${api}/api/v1/allocations/${alloc.json.id}`,
          'DELETE',
          auth,
          undefined,
          agent,
        ).catch(() => ({ status: 0, json: undefined }));
        if (rel.status !== 204) fail(`release ${rel.status}`);
      }
    }),
  );
  const loadS = Math.max(0.001, (performance.now() - (ctx.deadline - ctx.durationS * 1000)) / 1000);
  ctx.figures.allocations_per_s = Math.round(allocations.count / loadS);
  ctx.figures.allocation_p50_ms = allocTrend.percentile(50);
  ctx.figures.allocation_p99_ms = allocTrend.percentile(99);
  ctx.figures.call_p50_ms = callTrend.percentile(50);
  ctx.figures.call_p99_ms = callTrend.percentile(99);
  ctx.figures.error_kinds = Object.fromEntries(errorKinds);
  ctx.note(
    `${LOOPS} orchestrators over ${up} phones: ${ctx.figures.allocations_per_s as number} allocations/s, allocation p50 ${allocTrend.percentile(50).toFixed(1)} ms p99 ${allocTrend.percentile(99).toFixed(1)} ms, call p50 ${callTrend.percentile(50).toFixed(1)} ms p99 ${callTrend.percentile(99).toFixed(1)} ms, errors ${JSON.stringify(Object.fromEntries(errorKinds))}`,
  );
}

export const scenario: Scenario = {
  name: 'fleet',
  description:
    'phones enrolled with one code, then 200 orchestrators allocating, calling and releasing through /api/v1 and /mcp/devices/<id>',
  defaultDurationS: 60,
  thresholds: ['errors:rate>0.99', 'enroll_errors:count==0'],
  run,
  refusesTarget: 'it starts its own two nodes and enrolls phones into their store from 127.0.0.x source addresses',
  validate: (opts) => void oneRedisUrl(opts),
};
