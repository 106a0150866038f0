// Text through the tool surface: whatever string a tool accepts, the phone answers with a
// specific error or a result, never internal_error, and what it returns is well-formed
// Unicode (docs/decisions/0218-tool-strings-are-well-formed-unicode.md).
import { describe, expect, it } from 'vitest';
import { ResultSchema, type McpError } from '@modelcontextprotocol/sdk/types.js';
import { SimPhone } from '../sim/model.ts';
import { SCREENSHOT_BASE64_LIMIT } from '../sim/screenshot.ts';
import { loneSurrogate } from '../text.ts';
import { FRAME_LIMIT_BYTES } from './contract.ts';
import { callerOf, connect, err, ok } from './in-memory.ts';

const setup = async () => {
  const phone = new SimPhone({ seed: 7, now: () => 1_000 });
  const client = await connect({ phone, deviceId: 'phone-1', now: () => 5_000, runStepDelayMs: 0 });
  return { phone, call: callerOf(client) };
};

/** Every string in a result, at any depth, is well-formed (no half of a surrogate pair). */
const loneSurrogates = (value: unknown): string[] => {
  if (typeof value === 'string') return loneSurrogate(value) ? [value.slice(0, 40)] : [];
  if (value && typeof value === 'object') return Object.values(value).flatMap(loneSurrogates);
  return [];
};

describe('type_text', () => {
  it('refuses text with a lone surrogate, naming it, and changes nothing', async () => {
    const { phone, call } = await setup();
    ok(await call('open_app', { packageName: 'com.android.browser' }));
    const before = phone.snapshot();
    expect(err(await call('type_text', { text: 'a\uD800b', elementId: 'browser.url' }))).toMatchObject({
      code: 'invalid_arguments',
      message: expect.stringContaining('lone surrogate U+D800 at index 1'),
    });
    expect(err(await call('start_run', { steps: [{ action: 'type_text', text: 'ok\uDC00' }] }))).toMatchObject({
      code: 'invalid_arguments',
      message: expect.stringMatching(/lone surrogate U\+DC00 at index 2.*steps\[0\]\.text/),
    });
    expect(phone.snapshot()).toEqual(before);
    // A whole pair is one character, and a search for it loads.
    ok(await call('type_text', { text: 'a😀b', elementId: 'browser.url' }));
    expect(ok(await call('press_key', { key: 'ENTER' })).effect).toBe(
      'loaded https://www.google.com/search?q=a%F0%9F%98%80b',
    );
  });
});

describe('every string argument', () => {
  it('refuses a lone surrogate with invalid_arguments naming the argument, and changes nothing', async () => {
    const { phone, call } = await setup();
    const lone = 'k\uD83D';
    const calls: [string, Record<string, unknown>, string][] = [
      ['tap', { elementId: lone }, 'elementId'],
      ['hold', { elementId: lone }, 'elementId'],
      ['swipe', { elementId: lone, direction: 'up' }, 'elementId'],
      ['type_text', { text: 'x', elementId: lone }, 'elementId'],
      ['open_app', { packageName: lone }, 'packageName'],
      ['press_key', { key: 'HOME', idempotencyKey: lone }, 'idempotencyKey'],
      ['press_key', { key: 'HOME', leaseId: lone }, 'leaseId'],
      ['observe_screen', { leaseId: lone }, 'leaseId'],
      ['get_outcome', { idempotencyKey: lone }, 'idempotencyKey'],
      ['release_device', { leaseId: lone }, 'leaseId'],
      ['start_run', { goal: lone, steps: [{ action: 'press_key', key: 'HOME' }] }, 'goal'],
      ['start_run', { steps: [{ action: 'open_app', packageName: lone }] }, 'steps[0].packageName'],
      ['start_run', { steps: [{ action: 'tap', elementId: lone }] }, 'steps[0].elementId'],
      ['get_run', { runId: lone }, 'runId'],
      ['stop_run', { runId: lone }, 'runId'],
    ];
    const before = phone.snapshot();
    for (const [tool, args, field] of calls) {
      const refused = err(await call(tool, args));
      expect(refused, `${tool} ${field}`).toMatchObject({
        code: 'invalid_arguments',
        message: expect.stringContaining(`(a lone surrogate U+D83D at index 1) at ${field}`),
      });
      expect(loneSurrogates(refused), `${tool} ${field}`).toEqual([]);
    }
    expect(phone.snapshot()).toEqual(before);
    expect(ok(await call('list_devices')).devices[0].lease.state).toBe('free');
    expect(err(await call('get_run', {})).code).toBe('run_not_found');
  });

  it('never echoes half a pair in an error, even in a key or tool name the schema did not expect', async () => {
    const { call } = await setup();
    for (const result of [await call('list_devices', { ['x\uDC00']: 1 }), await call('no_such_tool\uD800', {})]) {
      expect(err(result).code).toMatch(/^(invalid_arguments|unknown_tool)$/);
      expect(loneSurrogates(err(result))).toEqual([]);
    }
  });
});

describe('text length', () => {
  it('says how many characters it typed as the published maxLength counts them: an emoji is one', async () => {
    const { phone, call } = await setup();
    const { tools } = await (await connect({ phone, deviceId: 'phone-1' })).listTools();
    const published = tools.find((t) => t.name === 'type_text')!.inputSchema.properties!.text;
    expect(published).toMatchObject({ type: 'string', minLength: 1, maxLength: 5000 });
    ok(await call('open_app', { packageName: 'com.phonebridge.notes' }));
    // 5000 characters as JSON Schema counts them (10000 UTF-16 units): within the schema.
    expect(ok(await call('type_text', { text: '😀'.repeat(5000), elementId: 'notes.body' })).effect).toBe(
      'typed 2500 of 5000 characters into notes.body (it holds at most 5000 UTF-16 units; an emoji takes two)',
    );
    expect(phone.snapshot().note).toBe('😀'.repeat(2500));
    expect(err(await call('type_text', { text: '😀'.repeat(5001) }))).toMatchObject({
      code: 'invalid_arguments',
      message: expect.stringContaining('<=5000 characters at text'),
    });
    expect(phone.snapshot().note).toBe('😀'.repeat(2500));
    ok(await call('press_key', { key: 'DEL' }));
    expect(ok(await call('type_text', { text: 'a' })).effect).toBe('typed 1 character into notes.body');
    expect(ok(await call('type_text', { text: 'b😀' })).effect).toBe(
      'typed 1 of 2 characters into notes.body (it holds at most 5000 UTF-16 units; an emoji takes two)',
    );
  });
});

describe('task requests', () => {
  it('never echo half a pair of an unknown task id in their error', async () => {
    const client = await connect({ phone: new SimPhone(), deviceId: 'phone-1' });
    for (const method of ['tasks/get', 'tasks/result', 'tasks/cancel']) {
      const error = await client.request({ method, params: { taskId: 'task-\uD800' } }, ResultSchema).then(
        () => expect.fail(`${method} answered`),
        (e: unknown) => e as McpError,
      );
      expect(error.message, method).toContain('no task task-\uFFFD');
      expect(loneSurrogate(error.message), method).toBeNull();
    }
  });
});

describe('a full field', () => {
  it('keeps whole characters: the last one that does not fit is dropped, not half of it', async () => {
    const { phone, call } = await setup();
    ok(await call('open_app', { packageName: 'com.android.browser' }));
    const text = `x${'😀'.repeat(2500)}`; // 5001 UTF-16 units; the field holds 5000
    expect(ok(await call('type_text', { text, elementId: 'browser.url' })).effect).toBe(
      'typed 2500 of 2501 characters into browser.url (it holds at most 5000 UTF-16 units; an emoji takes two)',
    );
    const observed = ok(await call('observe_screen'));
    expect(loneSurrogates(observed)).toEqual([]);
    expect(observed.elements.find((e: { id: string }) => e.id === 'browser.url').text).toBe(`x${'😀'.repeat(2499)}`);
    expect(ok(await call('press_key', { key: 'ENTER' })).effect).toMatch(
      /^loaded https:\/\/www\.google\.com\/search\?q=x(%F0%9F%98%80){2499}$/,
    );

    ok(await call('open_app', { packageName: 'com.phonebridge.notes' }));
    ok(await call('type_text', { text: 'a'.repeat(4999), elementId: 'notes.body' }));
    expect(ok(await call('type_text', { text: '😀' })).effect).toBe(
      'typed 0 of 1 character into notes.body (it holds at most 5000 UTF-16 units; an emoji takes two)',
    );
    expect(phone.snapshot().note).toBe('a'.repeat(4999));
    expect(loneSurrogates(ok(await call('observe_screen')))).toEqual([]);
  });
});

describe('press_key DEL', () => {
  it('deletes the last character whole, both halves of a surrogate pair', async () => {
    const { phone, call } = await setup();
    ok(await call('open_app', { packageName: 'com.android.browser' }));
    ok(await call('type_text', { text: 'a😀', elementId: 'browser.url' }));
    expect(ok(await call('press_key', { key: 'DEL' })).effect).toBe('deleted one character from browser.url');
    expect(phone.snapshot().browser.draft).toBe('a');
    expect(loneSurrogates(ok(await call('observe_screen')))).toEqual([]);
    expect(ok(await call('press_key', { key: 'ENTER' })).effect).toBe('loaded https://www.google.com/search?q=a');
  });
});

describe('page titles', () => {
  it('stay short enough that a full batch of wait_for_events always fits one result', async () => {
    const { phone, call } = await setup();
    ok(await call('open_app', { packageName: 'com.android.browser' }));
    const cursor = phone.cursor;
    // A control character costs the most bytes in a result (6, and 7 in the text block).
    for (let i = 0; i < 100; i++) {
      ok(await call('type_text', { text: `${i}${'\u0001'.repeat(4990)}`, elementId: 'browser.url' }));
      ok(await call('press_key', { key: 'ENTER' }));
    }
    const title = ok(await call('observe_screen')).title as string;
    expect(title).toBe(`99${'\u0001'.repeat(88)}… - Search`);
    const batch = ok(await call('wait_for_events', { cursor, timeout_s: 0 }));
    expect(batch.events).toHaveLength(100);
    expect(batch.events.at(-1).title).toBe(title);
  });
});

describe('a screenshot of a screen full of text', () => {
  /** Deterministic printable text with spaces, 5000 characters: a full field that compresses badly. */
  const noise = () => {
    const alphabet = 'abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789!@#$%&*()-=[]{};:,.<>/?     ';
    let seed = 1;
    return Array.from({ length: 5000 }, () => {
      seed = (seed * 1103515245 + 12345) % 2147483648;
      return alphabet[(seed >> 8) % alphabet.length];
    }).join('');
  };

  it('comes at the default size or smaller, within one message; an explicit size that does not fit is too_large', async () => {
    const { call } = await setup();
    ok(await call('open_app', { packageName: 'com.phonebridge.notes' }));
    ok(await call('type_text', { text: noise(), elementId: 'notes.body' }));
    ok(await call('open_app', { packageName: 'com.android.browser' }));
    // The largest element tree text can make: a search of 5000 three-byte characters.
    ok(await call('type_text', { text: '\u0800'.repeat(5000), elementId: 'browser.url' }));
    ok(await call('press_key', { key: 'ENTER' }));
    for (const app of ['com.phonebridge.notes', 'com.android.browser']) {
      ok(await call('open_app', { packageName: app }));
      const result = await call('observe_screen', { screenshot: {} });
      const shot = ok(result).screenshot;
      expect(shot.width, app).toBeLessThanOrEqual(540);
      expect(shot.width, app).toBeGreaterThanOrEqual(100);
      const image = result.content[1] as { type: string; data: string };
      expect(image.type).toBe('image');
      expect(image.data.length).toBeLessThanOrEqual(SCREENSHOT_BASE64_LIMIT);
      const frame = JSON.stringify({ jsonrpc: '2.0', id: 'relay-unique-id-0000000000', result });
      expect(Buffer.byteLength(frame), app).toBeLessThan(FRAME_LIMIT_BYTES);
    }
    ok(await call('open_app', { packageName: 'com.phonebridge.notes' }));
    expect(err(await call('observe_screen', { screenshot: { scale: 0.5 } }))).toMatchObject({
      code: 'too_large',
      message: expect.stringContaining('ask for a smaller width or scale'),
    });
  });
});

describe('the messages list', () => {
  it('counts its conversations in words that agree with the number', async () => {
    const { phone, call } = await setup();
    ok(await call('open_app', { packageName: 'com.android.messaging' }));
    const listText = async () =>
      (ok(await call('observe_screen')).elements as { id: string; text: string }[]).find(
        (e) => e.id === 'messages.list',
      )?.text;
    expect(await listText()).toBe('12 conversations');
    while (phone.snapshot().threads.length > 1) {
      const first = phone.elements().find((e) => e.role === 'listitem')!.id;
      ok(await call('hold', { elementId: first }));
      ok(await call('tap', { elementId: 'menu.delete' }));
    }
    expect(await listText()).toBe('1 conversation');
    ok(await call('hold', { elementId: phone.elements().find((e) => e.role === 'listitem')!.id }));
    ok(await call('tap', { elementId: 'menu.delete' }));
    expect(await listText()).toBe('0 conversations');
  });
});
