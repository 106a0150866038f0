// Runs the official MCP conformance suite (@modelcontextprotocol/conformance) through the
// relay: a real relay (`phonebridge serve`), a reference phone in bridge mode serving
// test/fixtures/conformance-server.ts over stdio, an API key, and the suite's `server`
// command pointed at the relay's /mcp.
//
//   npx tsx test/conformance/run.ts [--runs 2025-11-25,2026-07-28,server-session-lifecycle,server-sse-polling,suite:pending,suite:draft]
//                                   [--phone bridge|demo]
//                                   [--expected test/conformance/expected-failures.json]
//                                   [--gaps test/conformance/known-gaps.json]
//                                   [--write-failures FILE] [--direct] [--keep] [--verbose]
//
// --phone demo runs the suite through the relay against the reference phone itself (the
//              simulated phone of `phonebridge demo`, its own tools) instead of the bridged
//              fixture; its allowed failures are expected-failures-demo.json (the scenarios that
//              call fixture tools), and no known gaps.
// --direct     runs against the fixture served by serve-fixture-http.ts instead of the relay
//              (tells fixture gaps from relay gaps).
// --expected   the failures that are allowed (default expected-failures.json; pass
//              baseline-today.json to check that nothing got worse than today, `none` for
//              no allowed failure, as with --direct).
// --write-failures FILE   writes today's failures as an expected-failures file (reasons "TODO").
// --improvements-ok        listed failures that now pass are reported, not fatal (for baselines).
//
// In a requirement run (2025-11-25, 2026-07-28) only scored checks are compared: scenarios the
// suite marks "run and reported, but never scored" for a revision are counted and printed; the
// same scenarios are compared in the suite:pending and suite:draft runs, where every check counts.
//
// Auth: the conformance CLI has no way to add request headers (no flag, no environment
// variable), so the relay is reached through a small pass-through proxy on 127.0.0.1 that adds
// `X-Api-Key` to every request and otherwise streams requests and responses untouched (the
// response stream is closed when the client's is, so cancellation by disconnect still reaches
// the relay). A Host or Origin that names the proxy itself is rewritten to the relay's, because
// that is the same origin seen through the proxy; any other value (the DNS-rebinding scenario's
// evil.example.com) goes through as sent.
//
// Exit 0 when every failing check is listed in the expected file and every listed check fails;
// 1 on an unexpected failure or an unexpected pass; 2 when the set-up itself failed.
// The suite needs Node 22 (it imports fs.globSync); both come from the npm cache through npx
// (see suiteCommand), nothing is added to package.json.
import { spawn, execFile, type ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, request as httpRequest, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs, promisify } from 'node:util';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const HERE = join(ROOT, 'test/conformance');
const CONFORMANCE_VERSION = '0.2.0-alpha.12';
const NODE22_VERSION = '22.23.3';
const CLI = join(ROOT, 'bin/phonebridge.mjs');
const TSX = join(ROOT, 'node_modules/tsx/dist/cli.mjs');
const FIXTURE = join(ROOT, 'test/fixtures/conformance-server.ts');
const execFileP = promisify(execFile);

/**
 * `suite:pending` and `suite:draft` run the suite's pending and draft scenarios (`--suite`),
 * every one of them scored: what a later revision will require is checked today.
 */
export const ALL_RUNS = [
  '2025-11-25',
  '2026-07-28',
  'server-session-lifecycle',
  'server-sse-polling',
  'suite:pending',
  'suite:draft',
] as const;

export interface CheckResult {
  run: string;
  scenario: string;
  check: string;
  status: string;
  message?: string;
  /**
   * False for what the suite runs but never scores against the revision (extension,
   * pending, added-after-release scenarios): reported, not compared.
   */
  scored: boolean;
}
export interface ExpectedFailure {
  /** The run it belongs to: a requirement set (2025-11-25, 2026-07-28) or a scenario run. */
  run: string;
  scenario: string;
  check: string;
  reason: string;
}

// ---------------------------------------------------------------------------------------
// Processes

const children: ChildProcess[] = [];
function start(cmd: string, args: string[], opts: { cwd?: string; env?: NodeJS.ProcessEnv } = {}): ChildProcess {
  const child = spawn(cmd, args, {
    cwd: opts.cwd ?? ROOT,
    env: { ...process.env, ...opts.env },
    stdio: ['ignore', 'pipe', 'pipe'],
    detached: true,
  });
  children.push(child);
  return child;
}
function stopAll(): void {
  for (const c of children) {
    if (c.exitCode === null && c.pid) {
      try {
        process.kill(-c.pid, 'SIGTERM');
      } catch {
        /* already gone */
      }
    }
  }
}

function waitForLine<T>(
  child: ChildProcess,
  pick: (line: string) => T | undefined,
  timeoutMs: number,
  what: string,
): Promise<T> {
  return new Promise((resolvePromise, reject) => {
    let buf = '';
    let err = '';
    const timer = setTimeout(
      () => reject(new Error(`${what}: no ready line after ${timeoutMs} ms\n${err.slice(-2000)}`)),
      timeoutMs,
    );
    child.stderr?.on('data', (d: Buffer) => (err += d.toString()));
    child.stdout?.on('data', (d: Buffer) => {
      buf += d.toString();
      let nl: number;
      while ((nl = buf.indexOf('\n')) >= 0) {
        const line = buf.slice(0, nl);
        buf = buf.slice(nl + 1);
        const v = pick(line);
        if (v !== undefined) {
          clearTimeout(timer);
          resolvePromise(v);
        }
      }
    });
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`${what} exited with ${code}\n${err.slice(-2000)}`));
    });
  });
}

function jsonLine<T>(line: string, ok: (v: Record<string, unknown>) => boolean): T | undefined {
  try {
    const v = JSON.parse(line) as Record<string, unknown>;
    return ok(v) ? (v as T) : undefined;
  } catch {
    return undefined;
  }
}

async function cli(args: string[]): Promise<string> {
  const { stdout } = await execFileP(process.execPath, [CLI, ...args], { cwd: ROOT, timeout: 60_000 });
  return stdout.trim();
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

// ---------------------------------------------------------------------------------------
// The relay with one bridged phone

interface Target {
  /** The URL the suite is pointed at. */
  url: string;
  close(): Promise<void>;
}

async function startRelayTarget(log: (s: string) => void): Promise<Target> {
  const dataDir = mkdtempSync(join(tmpdir(), 'pb-conf-relay-'));
  const stateDir = mkdtempSync(join(tmpdir(), 'pb-conf-phone-'));
  const serve = start(process.execPath, [CLI, 'serve', '--port', '0', '--admin-port', '0', '--data-dir', dataDir]);
  const ready = await waitForLine(
    serve,
    (l) => jsonLine<{ ready: boolean; url: string; port: number }>(l, (v) => v.ready === true),
    60_000,
    'phonebridge serve',
  );
  log(`relay ready at ${ready.url}`);

  const qr = await cli(['pair', '--json', '--data-dir', dataDir]);
  const upstreamCmd = `${JSON.stringify(process.execPath)} ${JSON.stringify(TSX)} ${JSON.stringify(FIXTURE)}`;
  const phone = start(process.execPath, [
    CLI,
    'device',
    'run',
    '--state',
    stateDir,
    '--pair',
    qr,
    '--backend',
    'bridge',
    '--upstream-cmd',
    upstreamCmd,
    '--name',
    'conformance-fixture',
  ]);
  let phoneErr = '';
  phone.stderr?.on('data', (d: Buffer) => (phoneErr += d.toString()));
  phone.stdout?.resume();

  let deviceId: string | undefined;
  for (let i = 0; i < 120 && !deviceId; i++) {
    const rows = JSON.parse(await cli(['devices', 'list', '--json', '--data-dir', dataDir])) as Array<{ id: string }>;
    deviceId = rows[0]?.id;
    if (!deviceId) {
      if (phone.exitCode !== null)
        throw new Error(`device run exited with ${phone.exitCode}\n${phoneErr.slice(-2000)}`);
      await sleep(250);
    }
  }
  if (!deviceId) throw new Error(`the phone did not pair\n${phoneErr.slice(-2000)}`);
  const key = JSON.parse(await cli(['keys', 'create', '--device', deviceId, '--json', '--data-dir', dataDir])) as {
    token: string;
  };
  log(`phone ${deviceId} paired; key created`);
  return phoneTarget(
    ready.url,
    key.token,
    () => phone.exitCode === null,
    () => phoneErr,
    [dataDir, stateDir],
    log,
  );
}

/**
 * Once the phone behind the relay answers tools/list with `token`: the suite's target, the relay
 * behind a proxy that adds the key (the suite sends no credentials); closing it stops every child
 * and removes `dirs`.
 */
async function phoneTarget(
  relayUrl: string,
  token: string,
  alive: () => boolean,
  err: () => string,
  dirs: string[],
  log: (s: string) => void,
): Promise<Target> {
  await waitForPhone(relayUrl, token, alive, err);
  log('phone connected and initialized (tools/list answers)');
  const proxy = await authProxy(relayUrl, { 'x-api-key': token });
  return {
    url: proxy.url,
    async close() {
      await proxy.close();
      stopAll();
      await sleep(300);
      for (const d of dirs) rmSync(d, { recursive: true, force: true });
    },
  };
}

/** Until a session-era tools/list through the relay lists the fixture's tools. */
async function waitForPhone(mcpUrl: string, token: string, alive: () => boolean, err: () => string): Promise<void> {
  const post = async (body: unknown, session?: string) => {
    const res = await fetch(mcpUrl, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        accept: 'application/json, text/event-stream',
        'x-api-key': token,
        ...(session ? { 'mcp-session-id': session, 'mcp-protocol-version': '2025-11-25' } : {}),
      },
      body: JSON.stringify(body),
    });
    const text = await res.text();
    const data = text.startsWith('{')
      ? text
      : (text.split('\n').find((l) => l.startsWith('data: ')) ?? 'data: {}').slice(6);
    return {
      session: res.headers.get('mcp-session-id') ?? session,
      body: JSON.parse(data || '{}') as { result?: { tools?: unknown[] } },
    };
  };
  const deadline = Date.now() + 60_000;
  while (Date.now() < deadline) {
    if (!alive()) throw new Error(`device run exited\n${err().slice(-2000)}`);
    try {
      const init = await post({
        jsonrpc: '2.0',
        id: 1,
        method: 'initialize',
        params: {
          protocolVersion: '2025-11-25',
          capabilities: {},
          clientInfo: { name: 'conformance-run', version: '1' },
        },
      });
      const list = await post({ jsonrpc: '2.0', id: 2, method: 'tools/list' }, init.session ?? undefined);
      if ((list.body.result?.tools?.length ?? 0) > 0) return;
    } catch {
      /* not yet */
    }
    await sleep(300);
  }
  throw new Error(`the phone never answered tools/list through the relay\n${err().slice(-2000)}`);
}

/** A streaming pass-through proxy that adds headers (see the file comment). */
export async function authProxy(
  targetMcpUrl: string,
  add: Record<string, string>,
): Promise<{ url: string; close(): Promise<void> }> {
  const target = new URL(targetMcpUrl);
  let self = '';
  const server: Server = createServer((req, res) => {
    const headers: Record<string, string | string[] | undefined> = { ...req.headers, ...add };
    if (headers.host === self) headers.host = target.host;
    if (headers.origin === `http://${self}`) headers.origin = target.origin;
    const up = httpRequest(
      { host: target.hostname, port: target.port, method: req.method, path: req.url, headers },
      (upRes) => {
        res.writeHead(upRes.statusCode ?? 502, upRes.statusMessage, upRes.headers);
        res.flushHeaders();
        upRes.pipe(res);
      },
    );
    up.on('error', () => {
      if (!res.headersSent) res.writeHead(502).end();
      else res.destroy();
    });
    // The client going away closes the relay's response stream too (2026-07-28 cancellation).
    res.on('close', () => {
      if (!res.writableFinished) up.destroy();
    });
    req.pipe(up);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  self = `127.0.0.1:${(server.address() as AddressInfo).port}`;
  return {
    url: `http://${self}${target.pathname}`,
    close: () =>
      new Promise<void>((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
}

/**
 * `phonebridge demo`: a relay on the embedded store with the reference phone (simulated backend)
 * paired to it and a key, announced on one JSON line.
 */
async function startDemoTarget(log: (s: string) => void): Promise<Target> {
  const dataDir = mkdtempSync(join(tmpdir(), 'pb-conf-demo-'));
  const demo = start(process.execPath, [CLI, 'demo', '--port', '0', '--admin-port', '0', '--data-dir', dataDir]);
  let err = '';
  demo.stderr?.on('data', (d: Buffer) => (err += d.toString()));
  const ready = await waitForLine(
    demo,
    (l) => jsonLine<{ url: string; apiKey: string }>(l, (v) => v.ready === true && typeof v.apiKey === 'string'),
    120_000,
    'phonebridge demo',
  );
  log(`demo relay ready at ${ready.url}`);
  return phoneTarget(
    ready.url,
    ready.apiKey,
    () => demo.exitCode === null,
    () => err,
    [dataDir],
    log,
  );
}

async function startDirectTarget(log: (s: string) => void): Promise<Target> {
  const child = start(process.execPath, [TSX, join(HERE, 'serve-fixture-http.ts')]);
  const { url } = await waitForLine(
    child,
    (l) => jsonLine<{ url: string }>(l, (v) => typeof v.url === 'string'),
    60_000,
    'serve-fixture-http',
  );
  log(`fixture served directly at ${url}`);
  return {
    url,
    // eslint-disable-next-line @typescript-eslint/require-await -- the same close(): Promise<void> as the relay-backed targets
    async close() {
      stopAll();
    },
  };
}

// ---------------------------------------------------------------------------------------
// The suite

/**
 * Node 22 and the suite, from the npm cache: `npx -p node@22.23.3 -p @modelcontextprotocol/conformance@…`
 * resolves both once (about 30 s the first time on a machine, 3 s after), and the four runs
 * reuse the two paths. Not devDependencies: the `node` package puts a Node 22 `node` into
 * node_modules/.bin, which npm scripts and npx put first on PATH, so `npm test` would run the
 * relay on Node 22, where the uWebSockets.js binary (built for Node 20) does not load.
 */
let suite: { cmd: string; args: string[] } | undefined;
async function suiteCommand(): Promise<{ cmd: string; args: string[] }> {
  if (suite) return suite;
  const { stdout } = await execFileP(
    'npx',
    [
      '-y',
      '-p',
      `node@${NODE22_VERSION}`,
      '-p',
      `@modelcontextprotocol/conformance@${CONFORMANCE_VERSION}`,
      '-c',
      'command -v node; command -v conformance',
    ],
    { cwd: tmpdir(), timeout: 300_000 },
  );
  const [node22, conformance] = stdout
    .trim()
    .split('\n')
    .map((l) => l.trim());
  if (!node22 || !conformance)
    throw new Error(`npx did not resolve node@${NODE22_VERSION} and the conformance suite: ${stdout}`);
  return (suite = { cmd: node22, args: [conformance] });
}

async function runSuite(run: string, url: string, outDir: string, verbose: boolean): Promise<CheckResult[]> {
  const { cmd, args } = await suiteCommand();
  const selector = /^\d{4}-\d\d-\d\d$/.test(run)
    ? ['--requirements', run]
    : run.startsWith('suite:')
      ? ['--suite', run.slice('suite:'.length)]
      : ['--scenario', run];
  const child = start(cmd, [...args, 'server', '--url', url, ...selector, '-o', outDir, '--timeout', '30000'], {
    cwd: tmpdir(),
  });
  let out = '';
  child.stdout?.on('data', (d: Buffer) => {
    out += d.toString();
    if (verbose) process.stdout.write(d);
  });
  child.stderr?.on('data', (d: Buffer) => {
    out += d.toString();
    if (verbose) process.stderr.write(d);
  });
  await new Promise<void>((r) => child.once('exit', () => r()));
  mkdirSync(outDir, { recursive: true });
  writeFileSync(join(outDir, 'stdout.txt'), out);

  // "Not scored for 2026-07-28: N scenario(s) run, …" followed by "  ✓ name (pending)" lines.
  const unscored = new Set<string>();
  const tail = out.slice(Math.max(0, out.indexOf('Not scored for')));
  if (out.includes('Not scored for'))
    for (const m of tail.matchAll(/^\s+\S+\s+([a-z0-9][\w/-]*)\s+\(/gm)) unscored.add(m[1]);
  const scored = (scenario: string) => !/^\d{4}-/.test(run) || !unscored.has(scenario);

  const results: CheckResult[] = [];
  const seen = new Set<string>();
  for (const dir of existsSync(outDir) ? readdirSync(outDir) : []) {
    const m = /^server-(.+)-\d{4}-\d\d-\d\dT[\d-]+Z$/.exec(dir);
    const file = join(outDir, dir, 'checks.json');
    if (!m || !existsSync(file)) continue;
    seen.add(m[1]);
    for (const c of JSON.parse(readFileSync(file, 'utf8')) as Array<{
      id: string;
      status: string;
      errorMessage?: string;
    }>) {
      results.push({
        run,
        scenario: m[1],
        check: c.id,
        status: c.status,
        message: c.errorMessage,
        scored: scored(m[1]),
      });
    }
  }
  // A scenario that started but left no checks (crash, timeout) is a failure too.
  for (const m of out.matchAll(/=== Running scenario: (\S+) ===/g)) {
    if (!seen.has(m[1]))
      results.push({
        run,
        scenario: m[1],
        check: '(no results)',
        status: 'FAILURE',
        message: 'the scenario produced no checks.json',
        scored: scored(m[1]),
      });
  }
  return results;
}

// ---------------------------------------------------------------------------------------
// Comparison

const keyOf = (r: { run: string; scenario: string; check: string }) => `${r.run} | ${r.scenario} | ${r.check}`;

export interface Comparison {
  passed: number;
  failed: number;
  other: number;
  unexpectedFailures: CheckResult[];
  unexpectedPasses: ExpectedFailure[];
}

/**
 * A (run, scenario, check) fails when any of its results is FAILURE (a check id can repeat
 * within a scenario). Listed ones that did not run at all are not "unexpected passes".
 */
export function compare(all: CheckResult[], expected: ExpectedFailure[]): Comparison {
  const results = all.filter((r) => r.scored);
  const byKey = new Map<string, CheckResult[]>();
  for (const r of results) byKey.set(keyOf(r), [...(byKey.get(keyOf(r)) ?? []), r]);
  const allowed = new Set(expected.map(keyOf));
  const c: Comparison = { passed: 0, failed: 0, other: 0, unexpectedFailures: [], unexpectedPasses: [] };
  for (const r of results) {
    if (r.status === 'SUCCESS') c.passed++;
    else if (r.status === 'FAILURE') c.failed++;
    else c.other++;
  }
  for (const [k, rs] of byKey) {
    const failure = rs.find((r) => r.status === 'FAILURE');
    if (failure && !allowed.has(k)) c.unexpectedFailures.push(failure);
  }
  for (const e of expected) {
    const rs = byKey.get(keyOf(e));
    if (rs && !rs.some((r) => r.status === 'FAILURE')) c.unexpectedPasses.push(e);
  }
  return c;
}

export function failuresOf(results: CheckResult[]): ExpectedFailure[] {
  const out = new Map<string, ExpectedFailure>();
  for (const r of results)
    if (r.status === 'FAILURE' && r.scored)
      out.set(keyOf(r), {
        run: r.run,
        scenario: r.scenario,
        check: r.check,
        reason: `TODO: ${r.message ?? ''}`.trim(),
      });
  return [...out.values()];
}

// ---------------------------------------------------------------------------------------

export async function main(argv: string[]): Promise<number> {
  const { values } = parseArgs({
    args: argv,
    options: {
      runs: { type: 'string', default: ALL_RUNS.join(',') },
      phone: { type: 'string', default: 'bridge' },
      expected: { type: 'string' },
      // Checks that fail because the relay does not do something yet (each with its reason),
      // apart from the inherent ones: reported as gaps, never as inherent. `none` to leave out.
      gaps: { type: 'string' },
      'write-failures': { type: 'string' },
      direct: { type: 'boolean', default: false },
      keep: { type: 'boolean', default: false },
      verbose: { type: 'boolean', default: false },
      'improvements-ok': { type: 'boolean', default: false },
    },
  });
  const log = (s: string) => console.log(`[conformance] ${s}`);
  if (values.phone !== 'bridge' && values.phone !== 'demo') {
    console.error(`[conformance] --phone must be bridge or demo, not ${values.phone}`);
    return 2;
  }
  const demo = values.phone === 'demo';
  values.expected ??= join(HERE, demo ? 'expected-failures-demo.json' : 'expected-failures.json');
  values.gaps ??= demo ? 'none' : join(HERE, 'known-gaps.json');
  const runs = values.runs
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
  const load = (file: string) =>
    file === 'none' || values.expected === 'none' ? [] : (JSON.parse(readFileSync(file, 'utf8')) as ExpectedFailure[]);
  const inherent = load(values.expected).filter((e) => runs.includes(e.run));
  const gaps = load(values.gaps).filter((e) => runs.includes(e.run));
  const expected = [...inherent, ...gaps];
  const started = Date.now();
  const outRoot = mkdtempSync(join(tmpdir(), 'pb-conf-out-'));

  let target: Target | undefined;
  const results: CheckResult[] = [];
  try {
    const t = Date.now();
    const { cmd } = await suiteCommand();
    log(`suite: conformance ${CONFORMANCE_VERSION} on ${cmd} (resolved in ${((Date.now() - t) / 1000).toFixed(1)} s)`);
    target = values.direct
      ? await startDirectTarget(log)
      : demo
        ? await startDemoTarget(log)
        : await startRelayTarget(log);
    log(`set-up took ${((Date.now() - started) / 1000).toFixed(1)} s; suite URL ${target.url}`);
    // The runs go side by side against the one target: each is its own client with its own
    // sessions, and the suite spends most of its time waiting, not computing.
    const t0 = Date.now();
    const url = target.url;
    const perRun = await Promise.all(
      runs.map(async (run) => {
        const rs = await runSuite(run, url, join(outRoot, run), values.verbose);
        return { run, rs, seconds: (Date.now() - t0) / 1000 };
      }),
    );
    for (const { run, seconds, rs: all } of perRun) {
      let rs = all;
      // A scenario with a run of its own is counted there, not again inside a requirement set or suite.
      if (/^\d{4}-|^suite:/.test(run)) rs = rs.filter((r) => !runs.includes(r.scenario));
      results.push(...rs);
      const sc = rs.filter((r) => r.scored);
      const un = rs.filter((r) => !r.scored);
      const count = (xs: CheckResult[], st: string) => xs.filter((r) => r.status === st).length;
      log(
        `${run}: ${count(sc, 'SUCCESS')} passed, ${count(sc, 'FAILURE')} failed in ${new Set(sc.map((r) => r.scenario)).size} scored scenarios (done after ${seconds.toFixed(1)} s)` +
          (un.length
            ? `; not scored: ${count(un, 'SUCCESS')} passed, ${count(un, 'FAILURE')} failed in ${new Set(un.map((r) => r.scenario)).size} scenarios (${[...new Set(un.map((r) => r.scenario))].join(', ')})`
            : ''),
      );
      if (sc.length === 0 && un.length === 0) log(`${run}: WARNING no checks at all`);
      else if (count(sc, 'SUCCESS') + count(sc, 'FAILURE') === 0)
        log(
          `${run}: WARNING only informational checks: the scenario did not exercise anything (e.g. JSON where it wanted SSE)`,
        );
    }
  } catch (err) {
    console.error(`[conformance] set-up failed: ${(err as Error).message}`);
    await target?.close();
    stopAll();
    return 2;
  }
  await target.close();
  if (!values.keep) rmSync(outRoot, { recursive: true, force: true });
  else log(`results kept in ${outRoot}`);

  if (values['write-failures']) {
    writeFileSync(values['write-failures'], JSON.stringify(failuresOf(results), null, 2) + '\n');
    log(`wrote ${failuresOf(results).length} failures to ${values['write-failures']}`);
  }

  const c = compare(results, expected);
  for (const f of c.unexpectedFailures)
    console.log(`UNEXPECTED FAILURE  ${keyOf(f)}: ${(f.message ?? '').split('\n')[0].slice(0, 300)}`);
  for (const p of c.unexpectedPasses) console.log(`UNEXPECTED PASS     ${keyOf(p)} (listed: ${p.reason})`);
  log(
    `expected failures listed: ${inherent.length} ${demo ? 'needing fixture tools' : 'inherent'}, ${gaps.length} known gaps; unexpected failures: ${c.unexpectedFailures.length}; unexpected passes: ${c.unexpectedPasses.length}`,
  );
  log(`total ${((Date.now() - started) / 1000).toFixed(1)} s`);
  console.log(
    `conformance: ${c.passed} passed, ${c.failed} failed${c.other ? `, ${c.other} other (warnings/info/skipped)` : ''}`,
  );
  // With a baseline (--improvements-ok), a listed check that now passes is progress, not an error.
  return c.unexpectedFailures.length || (c.unexpectedPasses.length && !values['improvements-ok']) ? 1 : 0;
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  process.once('SIGINT', () => {
    stopAll();
    process.exit(130);
  });
  main(process.argv.slice(2)).then(
    (code) => process.exit(code),
    (err) => {
      console.error(err);
      stopAll();
      process.exit(2);
    },
  );
}
