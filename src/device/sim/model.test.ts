import { describe, expect, it } from 'vitest';
import { LAUNCHER_PACKAGE, SimError, SimPhone } from './model.ts';

const phoneAt = (t = 1_000) => new SimPhone({ seed: 42, now: () => t });

describe('SimPhone', () => {
  it('is deterministic from its seed', () => {
    expect(phoneAt().snapshot()).toEqual(phoneAt().snapshot());
    expect(new SimPhone({ seed: 1 }).snapshot().threads).not.toEqual(new SimPhone({ seed: 2 }).snapshot().threads);
  });

  it('starts on the home screen with one icon per app', () => {
    const phone = phoneAt();
    expect(phone.foregroundApp).toBe(LAUNCHER_PACKAGE);
    expect(
      phone
        .elements()
        .filter((e) => e.role === 'icon')
        .map((e) => e.id),
    ).toEqual(['app.settings', 'app.messages', 'app.notes', 'app.browser']);
    expect(phone.findElement('app.settings')).toMatchObject({
      text: 'Settings',
      bounds: { left: 0, top: 240, right: 270, bottom: 540 },
      enabled: true,
      focused: false,
      parentId: null,
    });
  });

  it('taps by coordinates or element id and emits app and screen changes', () => {
    const phone = phoneAt();
    expect(phone.tap({ x: 135, y: 390 })).toEqual({
      effect: 'opened com.android.settings',
      elementId: 'app.settings',
      point: { x: 135, y: 390 },
    });
    expect(phone.eventsSince(0)).toEqual([
      { seq: 1, at: 1_000, type: 'app_changed', app: 'com.android.settings', previousApp: LAUNCHER_PACKAGE },
      { seq: 2, at: 1_000, type: 'screen_changed', app: 'com.android.settings', screen: 'settings', title: 'Settings' },
    ]);
    expect(phone.tap({ x: 500, y: 2000 }).effect).toBe('nothing to tap there');
    expect(() => phone.tap({ x: 1080, y: 10 })).toThrow(SimError);
    expect(() => phone.tap({ elementId: 'app.notes' })).toThrow(/no element app.notes/);
  });

  it('toggles settings; airplane mode turns radios off and disables them', () => {
    const phone = phoneAt();
    phone.openApp('com.android.settings');
    phone.tap({ elementId: 'settings.bluetooth' });
    phone.tap({ elementId: 'settings.airplane_mode' });
    expect(phone.snapshot().settings).toEqual({ wifi: false, bluetooth: false, airplane_mode: true, dark_mode: false });
    expect(phone.findElement('settings.wifi')).toMatchObject({ checked: false, enabled: false });
    expect(() => phone.tap({ elementId: 'settings.wifi' })).toThrow(
      expect.objectContaining({ code: 'element_disabled' }),
    );
    expect(phone.findElement('status_bar')?.text).toBe('Airplane mode · 0 notifications');
  });

  it('types into the focused notes field, deletes and clears', () => {
    const phone = phoneAt();
    expect(() => phone.typeText('x')).toThrow(expect.objectContaining({ code: 'no_focused_field' }));
    phone.openApp('com.phonebridge.notes');
    phone.tap({ elementId: 'notes.body' });
    phone.typeText('hello');
    phone.pressKey('ENTER');
    phone.typeText('world');
    phone.pressKey('DEL');
    expect(phone.findElement('notes.body')).toMatchObject({ text: 'hello\nworl', focused: true });
    phone.hold({ elementId: 'notes.body' });
    expect(phone.snapshot().menu).toEqual(['menu.clear']);
    phone.tap({ elementId: 'menu.clear' });
    expect(phone.snapshot()).toMatchObject({ note: '', menu: null });
  });

  it('navigates the browser and goes back through its history', () => {
    const phone = phoneAt();
    phone.openApp('com.android.browser');
    phone.typeText('example.com', 'browser.url');
    phone.pressKey('ENTER');
    expect(phone.snapshot().browser).toEqual({ url: 'https://example.com/', title: 'Example Domain', draft: '' });
    expect(phone.findElement('browser.page.title')?.text).toBe('Example Domain');
    phone.typeText('cute cats', 'browser.url');
    phone.tap({ elementId: 'browser.go' });
    expect(phone.title).toBe('cute cats - Search');
    expect(phone.eventsSince(0, ['screen_changed']).map((e) => e.title)).toEqual([
      'New tab',
      'Example Domain',
      'cute cats - Search',
    ]);
    phone.pressKey('BACK');
    expect(phone.title).toBe('Example Domain');
    phone.pressKey('BACK');
    phone.pressKey('BACK');
    expect(phone.screen).toBe('home');
  });

  it('loads a search for any text in the address bar, a lone surrogate as U+FFFD as a URL would', () => {
    const phone = phoneAt();
    phone.openApp('com.android.browser');
    phone.typeText('a\uD800b', 'browser.url');
    expect(phone.pressKey('ENTER').effect).toBe('loaded https://www.google.com/search?q=a%EF%BF%BDb');
    expect(phone.title).toBe('a\uFFFDb - Search');
    phone.typeText('\uDC00', 'browser.url');
    phone.tap({ elementId: 'browser.go' });
    expect(phone.snapshot().browser.url).toBe('https://www.google.com/search?q=%EF%BF%BD');
  });

  it('scrolls the messages list, opens a thread and sends a reply', () => {
    const phone = phoneAt();
    phone.openApp('com.android.messaging');
    const visible = () =>
      phone
        .elements()
        .filter((e) => e.role === 'listitem')
        .map((e) => e.id);
    expect(visible()[0]).toBe('messages.thread.t1');
    expect(phone.swipe({ x: 540, y: 2000 }, { x: 540, y: 1000 }).effect).toBe('scrolled messages.list to 400');
    expect(visible()[0]).toBe('messages.thread.t3');
    expect(phone.swipeElement('messages.list', 'down').effect).toMatch(/scrolled messages.list to 0/);
    phone.tap({ elementId: 'messages.thread.t2' });
    const contact = phone.snapshot().threads[1].contact;
    expect(phone.title).toBe(contact);
    phone.typeText('On it', 'thread.compose');
    phone.pressKey('ENTER');
    expect(
      phone
        .elements()
        .filter((e) => e.id.startsWith('thread.message.'))
        .at(-1)?.text,
    ).toBe('Me: On it');
    expect(phone.findElement('thread.send')?.enabled).toBe(false);
  });

  it('keeps the list scroll in range when a conversation is deleted, and observing the screen changes nothing', () => {
    const phone = phoneAt();
    phone.openApp('com.android.messaging');
    expect(phone.swipe({ x: 540, y: 2200 }, { x: 540, y: 200 }).effect).toBe('scrolled messages.list to 400');
    phone.hold({ elementId: 'messages.thread.t12' });
    phone.tap({ elementId: 'menu.delete' });
    // 11 rows of 200 px in a 2000 px list scroll 200 px at most: the state says so at once,
    // not only after a layout pass has run.
    const after = phone.snapshot();
    expect(after.listScroll).toBe(200);
    expect(phone.elements().find((e) => e.role === 'listitem')?.id).toBe('messages.thread.t2');
    expect(phone.snapshot()).toEqual(after);
    expect(phone.swipeElement('messages.list', 'up').effect).toBe('list is already at its end');
  });

  it('shows at most one field of message text per screen: the newest messages, a share of it per preview', () => {
    const phone = phoneAt();
    phone.openApp('com.android.messaging');
    phone.tap({ elementId: 'messages.thread.t1' });
    const contact = phone.title;
    const seeded = phone.snapshot().threads[0].messages;
    const send = (text: string) => {
      phone.typeText(text, 'thread.compose');
      phone.pressKey('ENTER');
    };
    const bubbles = () =>
      phone
        .elements()
        .filter((e) => e.id.startsWith('thread.message.'))
        .map((e) => [e.id, e.text.length]);
    send('a'.repeat(3000));
    expect(bubbles().at(-1)).toEqual([`thread.message.${seeded}`, 'Me: '.length + 3000]);
    expect(bubbles()).toHaveLength(seeded + 1);
    send('b'.repeat(2000)); // 5000 in all: the older ones no longer fit
    expect(bubbles()).toEqual([
      [`thread.message.${seeded}`, 3004],
      [`thread.message.${seeded + 1}`, 2004],
    ]);
    send('c');
    expect(bubbles()).toEqual([
      [`thread.message.${seeded + 1}`, 2004],
      [`thread.message.${seeded + 2}`, 5],
    ]);
    send('d'.repeat(5000));
    expect(bubbles()).toEqual([[`thread.message.${seeded + 3}`, 5004]]);

    // The list: at most 11 rows at once on this screen (2000 px of 200 px rows, one partly at
    // each end), so a preview is at most 5000 / 11 = 454 characters, the last an ellipsis.
    const preview = () => phone.findElement('messages.thread.t1')!.text;
    phone.pressKey('BACK');
    expect(preview()).toBe(`${contact}: ${'d'.repeat(453)}…`);
    phone.tap({ elementId: 'messages.thread.t1' });
    send('😀'.repeat(2500)); // never cut between the halves of a surrogate pair
    phone.pressKey('BACK');
    expect(preview()).toBe(`${contact}: ${'😀'.repeat(226)}…`);
    phone.tap({ elementId: 'messages.thread.t1' });
    send('x'.repeat(454));
    phone.pressKey('BACK');
    expect(preview()).toBe(`${contact}: ${'x'.repeat(454)}`);
  });

  it('shows only the messages that fit above the compose box, none on a screen too short for one', () => {
    for (const height of [2400, 777]) {
      const phone = new SimPhone({ seed: 1, width: 720, height });
      phone.openApp('com.android.messaging');
      phone.tap({ elementId: 'messages.thread.t1' });
      const compose = phone.findElement('thread.compose')!;
      const messages = phone.elements().filter((e) => e.id.startsWith('thread.message.'));
      if (height === 2400) expect(messages.length).toBeGreaterThan(0);
      else expect(messages).toEqual([]);
      for (const m of messages) expect(m.bounds.bottom).toBeLessThanOrEqual(compose.bounds.top);
    }
  });

  it('opens a context menu on hold and deletes a conversation', () => {
    const phone = phoneAt();
    phone.openApp('com.android.messaging');
    phone.hold({ elementId: 'messages.thread.t1' });
    expect(
      phone
        .elements()
        .filter((e) => e.role === 'menuitem')
        .map((e) => e.text),
    ).toEqual(['Delete']);
    phone.tap({ elementId: 'menu.delete' });
    expect(phone.snapshot().threads.map((t) => t.id)).not.toContain('t1');
    phone.hold({ elementId: 'messages.thread.t2' });
    phone.tap({ x: 10, y: 100 }); // outside the menu: closes it
    expect(phone.snapshot().menu).toBeNull();
  });

  it('keys: HOME, BACK, TAB between fields, ESCAPE', () => {
    const phone = phoneAt();
    phone.openApp('com.android.messaging');
    phone.tap({ elementId: 'messages.thread.t1' });
    phone.pressKey('TAB');
    expect(phone.focusedElementId).toBe('thread.compose');
    phone.pressKey('ESCAPE');
    expect(phone.focusedElementId).toBeNull();
    phone.pressKey('BACK');
    expect(phone.screen).toBe('messages');
    phone.pressKey('HOME');
    expect(phone.screen).toBe('home');
    expect(() => phone.openApp('com.example.nothing')).toThrow(expect.objectContaining({ code: 'app_not_found' }));
  });

  it('injects notifications, shows them in the shade, and opens their app', () => {
    const phone = phoneAt();
    const seen: number[] = [];
    const unsubscribe = phone.onEvent((e) => seen.push(e.seq));
    const event = phone.injectNotification({ app: 'messages', title: 'Ada', text: 'Ping' });
    expect(event).toEqual({
      seq: 1,
      at: 1_000,
      type: 'notification',
      app: 'com.android.messaging',
      title: 'Ada',
      text: 'Ping',
    });
    expect(phone.findElement('status_bar')?.text).toBe('Wi-Fi · 1 notification');
    phone.swipe({ x: 540, y: 10 }, { x: 540, y: 900 });
    expect(phone.screen).toBe('shade');
    phone.tap({ elementId: 'shade.notification.1' });
    expect(phone.snapshot()).toMatchObject({ app: 'com.android.messaging', screen: 'messages', notifications: [] });
    unsubscribe();
    expect(phone.listenerCount).toBe(0);
    expect(seen).toEqual(phone.eventsSince(0).map((e) => e.seq));
  });

  it('keeps a bounded event log with a monotonic cursor', () => {
    const phone = new SimPhone({ eventLogSize: 3 });
    for (let i = 0; i < 5; i++) phone.injectNotification({ app: 'notes', title: `n${i}`, text: '' });
    expect(phone.cursor).toBe(5);
    expect(phone.eventsSince(0).map((e) => e.seq)).toEqual([3, 4, 5]);
    expect(phone.eventsSince(4).map((e) => e.title)).toEqual(['n4']);
  });
});
