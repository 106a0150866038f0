// Text through the tool surface: whatever string a tool accepts, the phone answers with a
// specific error or a result, never internal_error, and what it returns is well-formed
// Unicode (docs/decisions/0218-tool-strings-are-well-formed-unicode.md).
import { describe, expect, it } from 'vitest';
import { SimPhone } from '../sim/model.ts';
import { callerOf, connect, err, ok } from './in-memory.ts';

const setup = async () => {
  const phone = new SimPhone({ seed: 7, now: () => 1_000 });
  const client = await connect({ phone, deviceId: 'phone-1', now: () => 5_000, runStepDelayMs: 0 });
  return { phone, call: callerOf(client) };
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
