// The reference phone end to end through the relay: the official SDK client → the real relay → the real
// agent → createPhoneServer over a SimPhone. Two credentials (two keys of one device) play two
// callers; the SDK client validates every structuredContent against the published outputSchema
// (each client lists tools first, which is when the SDK learns the schemas).
import { join } from 'node:path';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { LoggingMessageNotificationSchema, type CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { DeviceAgent, silentLogger } from '../../src/device/agent/index.ts';
import { FRAME_LIMIT_BYTES, LAUNCH_VERSION, REPLAYED_META_KEY, SURFACE_VERSION } from '../../src/device/tools/index.ts';
import { SCOPES, type Scope } from '../../src/store/types.ts';
import { connectClient, startTestRelay, waitFor, type TestRelay } from '../helpers/relay.ts';
import { caller, ok, phoneServerFactory, removeScratch, scratchDir, SimPhone, sleep, toolError } from './helpers.ts';

const ALL_TOOLS = [
  'list_devices',
  'observe_screen',
  'get_outcome',
  'wait_for_events',
  'tap',
  'swipe',
  'hold',
  'type_text',
  'press_key',
  'open_app',
  'take_device',
  'release_device',
  'start_run',
  'get_run',
  'stop_run',
];
const READ_TOOLS = ['get_outcome', 'list_devices', 'observe_screen', 'wait_for_events'];

let relay: TestRelay;
beforeAll(async () => {
  relay = await startTestRelay();
});
afterAll(async () => {
  await relay?.stop();
  removeScratch();
});

interface Phone {
  sim: SimPhone;
  deviceId: string;
  agent: DeviceAgent;
  /** A new SDK client on a new key of this device (a credential of its own), tools listed. */
  client(scopes?: Scope[]): Promise<{ client: Client; call: ReturnType<typeof caller>; keyId: string }>;
}
const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c().catch(() => {});
});

/** A paired phone serving the real surface, connected through the relay. */
async function startPhone(server: { leaseTtlMs?: number; runStepDelayMs?: number } = {}): Promise<Phone> {
  const stateDir = join(scratchDir('pb-phone-'), 'state');
  const sim = new SimPhone({ seed: 11 });
  const { device_id: deviceId } = await DeviceAgent.pair({
    stateDir,
    qr: await relay.pair(),
    name: 'sim',
    log: silentLogger,
  });
  const agent = new DeviceAgent({
    stateDir,
    createServer: phoneServerFactory(stateDir, sim, { runStepDelayMs: 100, ...server }),
    log: silentLogger,
  });
  agent.start();
  cleanups.push(() => agent.stop());
  await waitFor(() => !!relay.relay.node.ctx.hub.device(deviceId)?.initResult, 10_000, 'phone online');
  return {
    sim,
    deviceId,
    agent,
    async client(scopes) {
      const key = await relay.key(deviceId, scopes);
      const { client } = await connectClient(relay.mcpUrl, key.token);
      cleanups.push(() => client.close());
      await client.listTools();
      return { client, call: caller(client), keyId: key.id };
    },
  };
}

const noteText = (sim: SimPhone) => sim.snapshot().note;

describe('tools/list through the relay', () => {
  it('shows every tool with its scope, the four annotation hints, input and output schemas and @since', async () => {
    const phone = await startPhone();
    const { client } = await phone.client();
    expect(client.getServerVersion()).toMatchObject({ name: 'phonebridge-phone', version: SURFACE_VERSION });
    const { tools } = await client.listTools();
    expect(tools.map((t) => t.name).sort()).toEqual([...ALL_TOOLS].sort());
    for (const t of tools) {
      expect(SCOPES, t.name).toContain(t._meta?.['phonebridge/scope']);
      expect(Object.keys(t.annotations ?? {}).sort(), t.name).toEqual([
        'destructiveHint',
        'idempotentHint',
        'openWorldHint',
        'readOnlyHint',
      ]);
      for (const hint of Object.values(t.annotations ?? {})) expect(typeof hint, t.name).toBe('boolean');
      expect(t.annotations?.openWorldHint).toBe(false);
      expect(t.inputSchema, t.name).toMatchObject({ type: 'object', additionalProperties: false });
      expect(t.outputSchema, t.name).toMatchObject({ type: 'object', properties: expect.any(Object) });
      expect(t.description, t.name).toMatch(new RegExp(`@since ${LAUNCH_VERSION.replace(/\./g, '\\.')}$`));
    }
    const named = (pick: (t: (typeof tools)[number]) => unknown) =>
      tools
        .filter(pick)
        .map((t) => t.name)
        .sort();
    expect(named((t) => t.annotations?.destructiveHint)).toEqual(['start_run', 'stop_run']);
    expect(named((t) => t._meta?.requiresUserInteraction === true)).toEqual(['start_run', 'stop_run']);
  });

  it('shows a read-only credential the devices:read tools only (the relay filters by the published scope)', async () => {
    const phone = await startPhone();
    const { client } = await phone.client(['devices:read']);
    expect((await client.listTools()).tools.map((t) => t.name).sort()).toEqual(READ_TOOLS);
  });
});

describe('every tool through the relay', () => {
  it('calls each tool once; each success is structuredContent (validated by the SDK) plus the same JSON as text', async () => {
    const phone = await startPhone();
    const { call } = await phone.client();
    const results: Record<string, CallToolResult> = {};
    results.list_devices = await call('list_devices');
    results.take_device = await call('take_device');
    const leaseId = ok(results.take_device).leaseId as string;
    results.observe_screen = await call('observe_screen', { leaseId, screenshot: { width: 270 } });
    results.open_app = await call('open_app', { packageName: 'com.phonebridge.notes', idempotencyKey: 'open-notes' });
    results.tap = await call('tap', { elementId: 'notes.body' });
    results.type_text = await call('type_text', { text: 'hi' });
    results.press_key = await call('press_key', { key: 'ENTER' });
    results.hold = await call('hold', { elementId: 'notes.body' });
    results.swipe = await call('swipe', { startX: 540, startY: 2000, endX: 540, endY: 1000 });
    results.get_outcome = await call('get_outcome', { idempotencyKey: 'open-notes' });
    results.wait_for_events = await call('wait_for_events', { cursor: 0, timeout_s: 0 });
    results.start_run = await call('start_run', { goal: 'go home', steps: [{ action: 'press_key', key: 'HOME' }] });
    results.get_run = await call('get_run', {});
    results.stop_run = await call('stop_run', { runId: ok(results.start_run).runId });
    results.release_device = await call('release_device', { leaseId });

    expect(Object.keys(results).sort()).toEqual([...ALL_TOOLS].sort());
    for (const [name, result] of Object.entries(results)) {
      expect(result.isError, `${name}: ${JSON.stringify(result.content)}`).toBeFalsy();
      expect(result.structuredContent, name).toBeDefined();
      expect(result.content[0], name).toEqual({ type: 'text', text: JSON.stringify(result.structuredContent) });
    }
    expect(ok(results.list_devices).devices).toEqual([
      expect.objectContaining({ deviceId: phone.deviceId, screen: { width: 1080, height: 2400 } }),
    ]);
    expect(ok(results.observe_screen)).toMatchObject({
      deviceId: phone.deviceId,
      leaseId,
      screenshot: { mimeType: 'image/png', width: 270, height: 600 },
    });
    expect(results.observe_screen.content[1]).toMatchObject({ type: 'image', mimeType: 'image/png' });
    expect(ok(results.type_text)).toMatchObject({ action: 'type_text', elementId: 'notes.body', leaseId });
    expect(ok(results.get_outcome)).toMatchObject({ found: true, tool: 'open_app', result: ok(results.open_app) });
    expect(ok(results.wait_for_events).events.length).toBeGreaterThan(0);
    expect(ok(results.start_run)).toMatchObject({ status: 'completed', stepsDone: 1 });
    expect(ok(results.release_device)).toEqual({ deviceId: phone.deviceId, leaseId, released: true });
    expect(phone.sim.snapshot()).toMatchObject({ screen: 'home', note: 'hi\n' });
  });
});

describe('strict inputs through the relay', () => {
  it('refuses an unknown key (leaseid) with a clear error, and a missing required key; nothing happens', async () => {
    const phone = await startPhone();
    const { call } = await phone.client();
    const before = phone.sim.snapshot();
    expect(toolError(await call('tap', { x: 540, y: 1200, leaseid: 'lease-1' }))).toMatchObject({
      code: 'invalid_arguments',
      message: expect.stringMatching(/Unrecognized key.*"leaseid"/),
    });
    expect(toolError(await call('type_text', {}))).toMatchObject({
      code: 'invalid_arguments',
      message: expect.stringContaining('text'),
    });
    expect(toolError(await call('release_device', {}))).toMatchObject({
      code: 'invalid_arguments',
      message: expect.stringContaining('leaseId'),
    });
    expect(phone.sim.snapshot()).toEqual(before);
    expect(ok(await call('list_devices')).devices[0].lease.state).toBe('free'); // no lease was taken either
  });
});

describe('leases with two credentials', () => {
  it('one holds; the other gets lease_required; a stale id gets lease_mismatch; release then take works', async () => {
    const phone = await startPhone();
    const a = await phone.client();
    const b = await phone.client();
    expect(a.keyId).not.toBe(b.keyId);

    const lease = ok(await a.call('take_device'));
    expect(lease).toMatchObject({ leaseId: expect.any(String), renewed: false, ttlS: 300 });
    const screen = phone.sim.screen;
    expect(toolError(await b.call('tap', { elementId: 'app.settings' }))).toMatchObject({
      code: 'lease_required',
      retryAfterS: expect.any(Number),
    });
    expect(toolError(await b.call('take_device'))).toMatchObject({ code: 'device_busy' });
    expect(phone.sim.screen).toBe(screen); // B's tap did nothing
    expect(ok(await b.call('list_devices')).devices[0].lease).toEqual({
      state: 'others',
      leaseId: null,
      expiresAt: expect.any(Number),
    });

    expect(toolError(await a.call('tap', { elementId: 'app.settings', leaseId: 'lease-999' }))).toMatchObject({
      code: 'lease_mismatch',
    });
    expect(ok(await a.call('tap', { elementId: 'app.settings', leaseId: lease.leaseId }))).toMatchObject({
      app: 'com.android.settings',
      leaseId: lease.leaseId,
    });
    expect(ok(await a.call('release_device', { leaseId: lease.leaseId })).released).toBe(true);
    expect(toolError(await a.call('release_device', { leaseId: lease.leaseId }))).toMatchObject({
      code: 'lease_mismatch',
    });
    expect(toolError(await a.call('press_key', { key: 'HOME', leaseId: lease.leaseId }))).toMatchObject({
      code: 'lease_mismatch',
    });

    const second = ok(await b.call('take_device'));
    expect(second.leaseId).not.toBe(lease.leaseId);
    expect(ok(await b.call('press_key', { key: 'HOME' }))).toMatchObject({ leaseId: second.leaseId, screen: 'home' });
    expect(toolError(await a.call('press_key', { key: 'BACK' }))).toMatchObject({ code: 'lease_required' });
  });

  it('a credential without devices:lease cannot take a free device implicitly: lease_required', async () => {
    const phone = await startPhone();
    const actor = await phone.client(['devices:read', 'devices:act']);
    expect(toolError(await actor.call('tap', { elementId: 'app.notes' }))).toMatchObject({
      code: 'lease_required',
      message: expect.stringContaining('devices:lease'),
    });
    expect(phone.sim.screen).toBe('home');
  });

  it('expiry frees the device', async () => {
    const phone = await startPhone({ leaseTtlMs: 600 });
    const a = await phone.client();
    const b = await phone.client();
    const lease = ok(await a.call('take_device'));
    expect(toolError(await b.call('tap', { elementId: 'app.notes' }))).toMatchObject({ code: 'lease_required' });
    await sleep(800);
    const taken = ok(await b.call('tap', { elementId: 'app.notes' })); // free again: B's act takes it
    expect(taken.leaseId).toEqual(expect.any(String));
    expect(taken.leaseId).not.toBe(lease.leaseId);
    expect(toolError(await a.call('tap', { elementId: 'notes.body', leaseId: lease.leaseId }))).toMatchObject({
      code: 'lease_mismatch',
    });
  });
});

describe('idempotency keys', () => {
  it('the same key twice acts once with the same outcome; get_outcome finds it; another credential with the same key does not collide', async () => {
    const phone = await startPhone();
    const a = await phone.client();
    const b = await phone.client();
    const lease = ok(await a.call('open_app', { packageName: 'com.phonebridge.notes' })).leaseId as string;

    const first = await a.call('type_text', { text: 'once', elementId: 'notes.body', idempotencyKey: 'k-1' });
    const again = await a.call('type_text', { text: 'once', elementId: 'notes.body', idempotencyKey: 'k-1' });
    expect(noteText(phone.sim)).toBe('once');
    expect(again.structuredContent).toEqual(first.structuredContent);
    expect(again._meta?.[REPLAYED_META_KEY]).toBe(true);
    expect(first._meta?.[REPLAYED_META_KEY]).toBeUndefined();
    expect(ok(await a.call('get_outcome', { idempotencyKey: 'k-1' }))).toMatchObject({
      found: true,
      tool: 'type_text',
      result: first.structuredContent,
    });
    expect(ok(await b.call('get_outcome', { idempotencyKey: 'k-1' }))).toMatchObject({ found: false, result: null });

    await a.call('release_device', { leaseId: lease });
    const theirs = await b.call('type_text', { text: 'once', elementId: 'notes.body', idempotencyKey: 'k-1' });
    expect(theirs._meta?.[REPLAYED_META_KEY]).toBeUndefined(); // B's key is B's: it acted
    expect(noteText(phone.sim)).toBe('onceonce');
    expect(ok(theirs).leaseId).not.toBe(ok(first).leaseId); // B's own outcome, under B's lease
    expect(ok(await b.call('get_outcome', { idempotencyKey: 'k-1' })).result).toEqual(theirs.structuredContent);
    expect(ok(await a.call('get_outcome', { idempotencyKey: 'k-1' })).result).toEqual(first.structuredContent);
  });
});

describe('wait_for_events', () => {
  it('returns an injected notification within its timeout', async () => {
    const phone = await startPhone();
    const { call } = await phone.client();
    const started = Date.now();
    const waiting = call('wait_for_events', { timeout_s: 10 });
    await sleep(300);
    phone.sim.injectNotification({ app: 'messages', title: 'Ada', text: 'See you at 6?' });
    const result = ok(await waiting);
    expect(Date.now() - started).toBeLessThan(5_000);
    expect(result.timedOut).toBe(false);
    expect(result.events).toEqual([
      expect.objectContaining({
        type: 'notification',
        app: 'com.android.messaging',
        title: 'Ada',
        text: 'See you at 6?',
      }),
    ]);
  });

  it('returns empty at the timeout', async () => {
    const phone = await startPhone();
    const { call } = await phone.client();
    const started = Date.now();
    const result = ok(await call('wait_for_events', { timeout_s: 1 }));
    const elapsed = Date.now() - started;
    expect(result).toMatchObject({ events: [], timedOut: true, more: false });
    expect(elapsed).toBeGreaterThanOrEqual(950);
    expect(elapsed).toBeLessThan(4_000);
  });
});

describe('runs', () => {
  const steps = [
    { action: 'open_app', packageName: 'com.android.settings' },
    { action: 'wait', ms: 150 },
    { action: 'press_key', key: 'HOME' },
    { action: 'open_app', packageName: 'com.phonebridge.notes' },
    { action: 'wait', ms: 150 },
    { action: 'press_key', key: 'HOME' },
    { action: 'wait', ms: 5_000 },
    { action: 'open_app', packageName: 'com.android.browser' },
  ];

  it('shows progress to the client, blocks the other credential act tools while running, and can be stopped', async () => {
    const phone = await startPhone();
    const a = await phone.client();
    const b = await phone.client();
    const logs: Array<{ runId?: string; event?: string }> = [];
    a.client.setNotificationHandler(LoggingMessageNotificationSchema, (n) => {
      logs.push(n.params.data as { runId?: string; event?: string });
    });
    const progress: Array<{ progress: number; total?: number; message?: string }> = [];
    const running = a.call(
      'start_run',
      { goal: 'tour', steps },
      { onprogress: (p) => progress.push(p), timeout: 20_000 },
    );

    await waitFor(() => progress.length >= 3, 10_000, 'progress notifications');
    expect(progress[0]).toMatchObject({
      progress: 0,
      total: steps.length,
      message: expect.stringMatching(/^run run-\d+ started: tour/),
    });
    expect(progress.map((p) => p.progress)).toEqual([...progress.map((p) => p.progress)].sort((x, y) => x - y));
    const active = ok(await a.call('get_run', {}));
    expect(active).toMatchObject({ status: 'running', goal: 'tour', stepsTotal: steps.length });
    expect(ok(await b.call('list_devices')).devices[0].run).toEqual({ runId: active.runId, status: 'running' });

    // While the run holds the device, the other credential's act tools refuse; observing works.
    const screen = phone.sim.snapshot();
    expect(toolError(await b.call('tap', { elementId: 'app.notes' }))).toMatchObject({
      code: 'device_busy',
      runId: active.runId,
    });
    expect(toolError(await b.call('take_device'))).toMatchObject({ code: 'device_busy' });
    expect(ok(await b.call('observe_screen', {})).app).toEqual(expect.any(String));
    expect(phone.sim.snapshot().notifications).toEqual(screen.notifications);

    const stopped = ok(await a.call('stop_run', { runId: active.runId }));
    expect(stopped).toMatchObject({ runId: active.runId, status: 'stopped' });
    const final = ok(await running);
    expect(final).toMatchObject({ runId: active.runId, status: 'stopped' });
    expect(final.stepsDone).toBeLessThan(steps.length);
    expect(phone.sim.foregroundApp).not.toBe('com.android.browser'); // the last step never ran
    await waitFor(() => logs.some((l) => l.runId === active.runId && l.event === 'ended'), 5_000, 'run log messages');
    expect(logs.filter((l) => l.runId === active.runId).map((l) => l.event)).toContain('started');

    // The device is free again: B acts (and takes the lease).
    expect(ok(await b.call('press_key', { key: 'HOME' }))).toMatchObject({
      screen: 'home',
      leaseId: expect.any(String),
    });
  });

  it('cancelling the waiting start_run request stops the run on the phone', async () => {
    const phone = await startPhone();
    const a = await phone.client();
    const controller = new AbortController();
    const progress: number[] = [];
    const running = a.call(
      'start_run',
      { steps },
      { signal: controller.signal, onprogress: (p) => progress.push(p.progress) },
    );
    await waitFor(() => progress.length >= 2, 10_000, 'run started');
    controller.abort('changed my mind');
    await expect(running).rejects.toThrow();
    await waitFor(async () => ok(await a.call('get_run', {})).status !== 'running', 5_000, 'run stopped on the phone');
    expect(ok(await a.call('get_run', {}))).toMatchObject({ status: 'stopped', failure: { code: 'cancelled' } });
  });
});

describe('screenshots and the frame limit', () => {
  it('the largest allowed screenshot fits 256 KiB on every app screen; a larger one is a tool error and the socket stays up', async () => {
    const phone = await startPhone();
    const { call } = await phone.client();
    const socket = relay.relay.node.ctx.hub.device(phone.deviceId);
    let drops = 0;
    phone.agent.on('disconnected', () => drops++);
    for (const app of [
      'com.android.settings',
      'com.android.messaging',
      'com.phonebridge.notes',
      'com.android.browser',
      'com.android.launcher',
    ]) {
      if (app === 'com.android.launcher') await call('press_key', { key: 'HOME' });
      else await call('open_app', { packageName: app });
      const largest = await call('observe_screen', { screenshot: { width: 1080 } });
      expect(ok(largest).screenshot, app).toMatchObject({ width: 1080, height: 2400 });
      // What the relay forwarded, with an envelope around it, is under the frame limit.
      expect(Buffer.byteLength(JSON.stringify({ jsonrpc: '2.0', id: 2 ** 31, result: largest })), app).toBeLessThan(
        FRAME_LIMIT_BYTES,
      );
    }
    const refused = toolError(await call('observe_screen', { screenshot: { width: 1081 } }));
    expect(refused).toMatchObject({ code: 'too_large', message: expect.stringContaining('1080') });
    expect(toolError(await call('observe_screen', { screenshot: { scale: 2 } }))).toMatchObject({ code: 'too_large' });
    // Same socket, still serving.
    expect(ok(await call('observe_screen', { screenshot: { scale: 0.25 } })).screenshot).toMatchObject({ width: 270 });
    expect(relay.relay.node.ctx.hub.device(phone.deviceId)).toBe(socket);
    expect(drops).toBe(0);
  });
});
