// The tool-surface rules (docs/TOOLS.md) that hold for every tool: scopes, annotations, typed results,
// error envelopes, strict inputs, version notes. Every tool is called at least once here,
// with the SDK client validating each structuredContent against the published outputSchema.
import { describe, expect, it } from 'vitest';
import { SimPhone } from '../sim/model.ts';
import { FRAME_LIMIT_BYTES, LAUNCH_VERSION, SCOPES, SURFACE_CHANGES, SURFACE_VERSION } from './contract.ts';
import { callerOf, connect, err, ok } from './in-memory.ts';
import { TOOL_CATALOG, TOOL_SCOPES } from './server.ts';

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

const setup = async () => {
  const phone = new SimPhone({ seed: 7, now: () => 1_000 });
  const client = await connect({ phone, deviceId: 'phone-1', now: () => 5_000, runStepDelayMs: 1 });
  return { phone, client, call: callerOf(client) };
};

describe('tools/list', () => {
  it('publishes every tool with scope, four explicit hints, schemas and an @since note', async () => {
    const { client } = await setup();
    expect(client.getServerVersion()?.version).toBe(SURFACE_VERSION);
    const { tools } = await client.listTools();
    expect(tools.map((t) => t.name).sort()).toEqual([...ALL_TOOLS].sort());
    for (const t of tools) {
      expect(SCOPES).toContain(t._meta?.['phonebridge/scope']);
      expect(t._meta?.['phonebridge/scope']).toBe(TOOL_SCOPES[t.name]);
      expect(Object.keys(t.annotations ?? {}).sort()).toEqual([
        'destructiveHint',
        'idempotentHint',
        'openWorldHint',
        'readOnlyHint',
      ]);
      for (const hint of Object.values(t.annotations ?? {})) expect(typeof hint).toBe('boolean');
      expect(t.annotations?.openWorldHint).toBe(false);
      expect(t.inputSchema).toMatchObject({ type: 'object', additionalProperties: false });
      expect(t.outputSchema).toMatchObject({ type: 'object' });
      // Every tool came with the launch; what later releases added says its own @since.
      expect(t.description).toMatch(new RegExp(`@since ${LAUNCH_VERSION.replace(/\./g, '\\.')}$`));
    }
  });

  it('versions the surface by its newest addition, and every @since in the catalog names a release', async () => {
    const { client } = await setup();
    expect(SURFACE_CHANGES[0].version).toBe(SURFACE_VERSION);
    expect(SURFACE_CHANGES.at(-1)!.version).toBe(LAUNCH_VERSION);
    const versions = SURFACE_CHANGES.map((c) => c.version);
    expect([...versions].sort().reverse()).toEqual(versions);
    const catalog = JSON.stringify((await client.listTools()).tools);
    const named = new Set([...catalog.matchAll(/@since (\d{4}\.\d{2}\.\d{2})/g)].map((m) => m[1]));
    expect([...named].sort()).toEqual([...versions].sort());
  });

  it('marks exactly the two run tools destructive and needing a person, and observers read-only', async () => {
    const { client } = await setup();
    const { tools } = await client.listTools();
    const named = (hint: (t: (typeof tools)[number]) => unknown) =>
      tools
        .filter(hint)
        .map((t) => t.name)
        .sort();
    expect(named((t) => t.annotations?.destructiveHint)).toEqual(['start_run', 'stop_run']);
    expect(named((t) => t._meta?.requiresUserInteraction === true)).toEqual(['start_run', 'stop_run']);
    expect(named((t) => t.annotations?.readOnlyHint)).toEqual([
      'get_outcome',
      'get_run',
      'list_devices',
      'observe_screen',
      'wait_for_events',
    ]);
    expect(named((t) => t._meta?.['phonebridge/scope'] === 'devices:act' && t.annotations?.idempotentHint)).toEqual([
      'hold',
      'open_app',
      'press_key',
      'swipe',
      'tap',
      'type_text',
    ]);
    expect(TOOL_CATALOG.map((t) => t.name)).toEqual(tools.map((t) => t.name));
  });

  it('offers leaseId on every action and observation tool, idempotencyKey on act tools and start_run', async () => {
    const { client } = await setup();
    const { tools } = await client.listTools();
    const props = (name: string) => Object.keys(tools.find((t) => t.name === name)!.inputSchema.properties ?? {});
    for (const name of [
      'observe_screen',
      'wait_for_events',
      'tap',
      'swipe',
      'hold',
      'type_text',
      'press_key',
      'open_app',
      'start_run',
    ]) {
      expect(props(name)).toContain('leaseId');
    }
    for (const name of ['tap', 'swipe', 'hold', 'type_text', 'press_key', 'open_app', 'start_run'])
      expect(props(name)).toContain('idempotencyKey');
    expect(tools.find((t) => t.name === 'release_device')!.inputSchema.required).toEqual(['leaseId']);
  });
});

describe('tools/call', () => {
  it('calls every tool once; each success is structuredContent plus the same JSON as text', async () => {
    const { phone, call } = await setup();
    const results = {
      list_devices: await call('list_devices'),
      take_device: await call('take_device'),
      observe_screen: await call('observe_screen'),
      open_app: await call('open_app', { packageName: 'com.phonebridge.notes', idempotencyKey: 'k1' }),
      tap: await call('tap', { elementId: 'notes.body' }),
      type_text: await call('type_text', { text: 'hi' }),
      press_key: await call('press_key', { key: 'ENTER' }),
      hold: await call('hold', { elementId: 'notes.body' }),
      swipe: await call('swipe', { startX: 540, startY: 2000, endX: 540, endY: 1000 }),
      get_outcome: await call('get_outcome', { idempotencyKey: 'k1' }),
      wait_for_events: await call('wait_for_events', { cursor: 0, timeout_s: 0 }),
      start_run: await call('start_run', { steps: [{ action: 'press_key', key: 'HOME' }] }),
      get_run: await call('get_run', {}),
      stop_run: await call('stop_run', { runId: 'run-1' }),
      release_device: undefined as unknown,
    };
    const leaseId = ok(results.take_device).leaseId;
    results.release_device = await call('release_device', { leaseId });
    expect(Object.keys(results).sort()).toEqual([...ALL_TOOLS].sort());
    for (const [name, result] of Object.entries(results) as [string, Awaited<ReturnType<typeof call>>][]) {
      expect(result.isError, name).toBeFalsy();
      expect(result.content[0]).toEqual({ type: 'text', text: JSON.stringify(result.structuredContent) });
    }
    expect(ok(results.list_devices).devices).toEqual([
      expect.objectContaining({ deviceId: 'phone-1', model: 'phonebridge-sim', screen: { width: 1080, height: 2400 } }),
    ]);
    expect(ok(results.type_text)).toMatchObject({
      action: 'type_text',
      elementId: 'notes.body',
      app: 'com.phonebridge.notes',
      leaseId,
    });
    expect(ok(results.get_outcome)).toMatchObject({ found: true, tool: 'open_app', result: ok(results.open_app) });
    expect(ok(results.start_run)).toMatchObject({ runId: 'run-1', status: 'completed', stepsDone: 1 });
    expect(ok(results.stop_run).status).toBe('completed'); // already ended: unchanged
    expect(phone.snapshot()).toMatchObject({ screen: 'home', note: 'hi\n' });
  });

  it('returns the screenshot as an image block beside the typed description', async () => {
    const { call } = await setup();
    const result = await call('observe_screen', { screenshot: { width: 216 } });
    expect(ok(result).screenshot).toMatchObject({ mimeType: 'image/png', width: 216, height: 480 });
    expect(result.content[1]).toMatchObject({ type: 'image', mimeType: 'image/png' });
    expect(ok(result).elements.find((e: { id: string }) => e.id === 'app.notes')).toMatchObject({
      role: 'icon',
      text: 'Notes',
    });
  });

  it('keeps the largest screenshot inside one frame and refuses a larger one with too_large', async () => {
    const { call } = await setup();
    const largest = await call('observe_screen', { screenshot: { scale: 1 } });
    const frame = JSON.stringify({ jsonrpc: '2.0', id: 'relay-unique-id-0000000000', result: largest });
    expect(ok(largest).screenshot.width).toBe(1080);
    expect(Buffer.byteLength(frame)).toBeLessThan(FRAME_LIMIT_BYTES);
    expect(err(await call('observe_screen', { screenshot: { width: 2160 } }))).toMatchObject({ code: 'too_large' });
    expect(ok(await call('list_devices')).devices).toHaveLength(1); // the connection is fine
  });

  it('refuses any result that would not fit one frame with too_large', async () => {
    const { call } = await setup();
    ok(await call('open_app', { packageName: 'com.phonebridge.notes' }));
    ok(
      await call('type_text', {
        text: 'The quick brown fox jumps over the lazy dog. '.repeat(110),
        elementId: 'notes.body',
      }),
    );
    // A screenshot the caller sized itself is not shrunk to fit (docs/decisions/0219-default-screenshot-fits.md).
    expect(err(await call('observe_screen', { screenshot: { scale: 1 } }))).toMatchObject({
      code: 'too_large',
      message: expect.stringContaining('byte limit'),
    });
  });

  it('the notification shade stays observable with eight of the largest notifications in it', async () => {
    const { phone, call } = await setup();
    for (let i = 0; i < 8; i++)
      phone.injectNotification({ app: 'notes', title: '\u0001'.repeat(6000), text: '"'.repeat(6000) });
    phone.swipe({ x: 500, y: 10 }, { x: 500, y: 1000 });
    const rows = ok(await call('observe_screen')).elements.filter((e: { role: string }) => e.role === 'listitem');
    expect(rows).toHaveLength(8);
    for (const r of rows) expect(r.text.length).toBeLessThanOrEqual(5000 / 8);
  });

  it('typing never grows a field past what observe_screen can return', async () => {
    const { phone, call } = await setup();
    ok(await call('open_app', { packageName: 'com.phonebridge.notes' }));
    for (let i = 0; i < 60; i++) ok(await call('type_text', { text: 'word '.repeat(1000), elementId: 'notes.body' }));
    expect(
      ok(await call('observe_screen')).elements.find((e: { id: string }) => e.id === 'notes.body').text,
    ).toHaveLength(5000);
    expect(ok(await call('type_text', { text: 'more' })).effect).toBe(
      'typed 0 of 4 characters into notes.body (it holds at most 5000 UTF-16 units; an emoji takes two)',
    );
    expect(phone.snapshot().note).toBe('word '.repeat(1000));
  });

  it('messages never grow the conversation or the conversation list past what observe_screen can return', async () => {
    const { phone, call } = await setup();
    // A control character is 6 bytes in structuredContent and 7 in the text block's JSON:
    // the most a character can cost. Every conversation's nine newest messages are full fields.
    const worst = '\u0001'.repeat(5000);
    for (const t of phone.snapshot().threads) {
      ok(await call('open_app', { packageName: 'com.android.messaging' }));
      while (!phone.findElement(`messages.thread.${t.id}`))
        ok(await call('swipe', { elementId: 'messages.list', direction: 'up' }));
      ok(await call('tap', { elementId: `messages.thread.${t.id}` }));
      for (let i = 0; i < 9; i++) {
        ok(await call('type_text', { text: worst, elementId: 'thread.compose' }));
        ok(await call('press_key', { key: 'ENTER' }));
      }
    }
    ok(await call('type_text', { text: worst, elementId: 'thread.compose' })); // and a full draft
    const thread = ok(await call('observe_screen')).elements as { id: string; text: string }[];
    expect(thread.find((e) => e.id === 'thread.compose')?.text).toBe(worst);
    expect(thread.filter((e) => e.id.startsWith('thread.message.')).map((e) => e.text)).toEqual([`Me: ${worst}`]);
    ok(await call('open_app', { packageName: 'com.android.messaging' }));
    for (;;) {
      const list = ok(await call('observe_screen')).elements as { id: string; text: string }[];
      expect(list.filter((e) => e.id.startsWith('messages.thread.')).length).toBeGreaterThan(0);
      const scrolled = ok(await call('swipe', { elementId: 'messages.list', direction: 'up' }));
      if (scrolled.effect === 'list is already at its end') break;
    }
  });

  it('errors are envelopes in the text block, never structuredContent', async () => {
    const { call } = await setup();
    const failure = await call('open_app', { packageName: 'com.example.missing' });
    expect(failure.isError).toBe(true);
    expect(failure.structuredContent).toBeUndefined();
    expect(err(failure)).toEqual({ code: 'app_not_found', message: expect.stringContaining('com.android.settings') });
    expect(err(await call('no_such_tool'))).toMatchObject({ code: 'unknown_tool' });
  });
});

describe('strict inputs', () => {
  it('refuses an unknown key instead of stripping it', async () => {
    const { phone, call } = await setup();
    const refused = err(await call('open_app', { packageName: 'com.android.settings', leaseid: 'lease-1' }));
    expect(refused).toMatchObject({ code: 'invalid_arguments', message: expect.stringContaining('"leaseid"') });
    expect(phone.screen).toBe('home'); // nothing happened
    for (const name of ALL_TOOLS) {
      expect(
        err(await call(name, { leaseId: 'x', bogus: 1, runId: 'r', idempotencyKey: 'k', key: 'HOME' })).code,
        name,
      ).toBe('invalid_arguments');
    }
  });

  it('refuses a missing required key and a half-given target', async () => {
    const { call } = await setup();
    expect(err(await call('type_text', {}))).toMatchObject({
      code: 'invalid_arguments',
      message: expect.stringContaining('text'),
    });
    expect(err(await call('release_device', {}))).toMatchObject({
      code: 'invalid_arguments',
      message: expect.stringContaining('leaseId'),
    });
    expect(err(await call('tap', { x: 10 }))).toMatchObject({
      code: 'invalid_arguments',
      message: expect.stringContaining('give x and y, or elementId'),
    });
    expect(err(await call('swipe', { elementId: 'messages.list' }))).toMatchObject({ code: 'invalid_arguments' });
    expect(err(await call('wait_for_events', { timeout_s: 601 }))).toMatchObject({ code: 'invalid_arguments' });
    expect(err(await call('start_run', { steps: [{ action: 'tap', x: 1, y: 2, z: 3 }] }))).toMatchObject({
      code: 'invalid_arguments',
    });
  });
});

describe('caller and scopes', () => {
  it('refuses a tool outside the caller scopes and a malformed caller', async () => {
    const { client } = await setup();
    const reader = callerOf(client, { credential: 'tok-r', scopes: ['devices:read'] });
    expect(ok(await reader('list_devices')).devices).toHaveLength(1);
    expect(err(await reader('tap', { x: 1, y: 100 }))).toMatchObject({
      code: 'insufficient_scope',
      scope: 'devices:act',
    });
    const malformed = await client.callTool({
      name: 'list_devices',
      arguments: {},
      _meta: { 'phonebridge/caller': { credential: 7 } },
    });
    expect(err(malformed as never)).toMatchObject({ code: 'invalid_caller' });
  });
});
