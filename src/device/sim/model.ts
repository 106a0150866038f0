// A small deterministic model of an Android phone: pure state, no I/O, no timers.
// The same seed gives the same contacts and messages; the injected clock only stamps events.
// Everything the tool surface can see is derived from `elements()`, so tests can assert exact states.
// This file holds the state and what can be done to it; screens.ts lays out each screen from it.
import {
  MAX_FIELD_CHARS,
  STATUS_H,
  center,
  layoutScreen,
  maxListScroll,
  type PhoneActions,
  type PhoneView,
  type UiNode,
} from './screens.ts';
import { codePoints, cut, head, wellFormed } from '../text.ts';
import { prng } from '../../prng.ts';

export { MAX_FIELD_CHARS };
/** The longest notification title or text the phone keeps, as Android does. */
export const NOTIFICATION_TEXT_MAX = 5 * 1024;

export const LAUNCHER_PACKAGE = 'com.android.launcher';
export const SYSTEM_UI_PACKAGE = 'com.android.systemui';

export const APPS = [
  { key: 'settings', package: 'com.android.settings', label: 'Settings' },
  { key: 'messages', package: 'com.android.messaging', label: 'Messages' },
  { key: 'notes', package: 'com.phonebridge.notes', label: 'Notes' },
  { key: 'browser', package: 'com.android.browser', label: 'Browser' },
] as const;
export type AppKey = (typeof APPS)[number]['key'];

export const KEYS = ['BACK', 'HOME', 'ENTER', 'DEL', 'TAB', 'SPACE', 'ESCAPE'] as const;
export type Key = (typeof KEYS)[number];

export const EVENT_TYPES = ['notification', 'app_changed', 'screen_changed'] as const;
export type EventType = (typeof EVENT_TYPES)[number];

export const SETTINGS = ['wifi', 'bluetooth', 'airplane_mode', 'dark_mode'] as const;
export type SettingName = (typeof SETTINGS)[number];

export type Role =
  | 'statusbar'
  | 'button'
  | 'icon'
  | 'heading'
  | 'text'
  | 'toggle'
  | 'textfield'
  | 'list'
  | 'listitem'
  | 'overlay'
  | 'menu'
  | 'menuitem';

export interface Bounds {
  left: number;
  top: number;
  right: number;
  bottom: number;
}
export interface Point {
  x: number;
  y: number;
}

export interface UiElement {
  id: string;
  role: Role;
  text: string;
  bounds: Bounds;
  enabled: boolean;
  focused: boolean;
  /** Present on toggles only. */
  checked?: boolean;
  parentId: string | null;
}

export interface PhoneEvent {
  /** Strictly increasing; the cursor of `wait_for_events`. */
  seq: number;
  type: EventType;
  /** Milliseconds since the epoch, from the phone's clock. */
  at: number;
  /** Package the event is about (the new foreground app for app_changed). */
  app: string;
  previousApp?: string;
  screen?: string;
  title?: string;
  text?: string;
}

export interface Notification {
  id: number;
  app: string;
  title: string;
  text: string;
}

/** What an action did, in words an agent (and a test) can read. */
export interface ActEffect {
  effect: string;
  elementId: string | null;
  point: Point | null;
}

export class SimError extends Error {
  constructor(
    readonly code: string,
    message: string,
  ) {
    super(message);
  }
}

export interface SimPhoneOptions {
  seed?: number;
  width?: number;
  height?: number;
  /** Clock for event timestamps; inject a fixed one for exact assertions. */
  now?: () => number;
  /** Events kept for `eventsSince`; older ones are dropped. */
  eventLogSize?: number;
}

export type Route =
  | { screen: 'home' }
  | { screen: 'settings' }
  | { screen: 'messages' }
  | { screen: 'thread'; threadId: string }
  | { screen: 'notes' }
  | { screen: 'browser' }
  | { screen: 'shade' };

interface Message {
  from: 'me' | 'them';
  text: string;
}
export interface Thread {
  id: string;
  contact: string;
  messages: Message[];
}

/** An open context menu: where it was opened and what its items do. */
export interface ContextMenu {
  anchor: Point;
  items: { id: string; text: string; run: () => string }[];
}

const CONTACTS = [
  'Ada',
  'Grace',
  'Alan',
  'Edsger',
  'Barbara',
  'Donald',
  'Margaret',
  'Ken',
  'Dennis',
  'Radia',
  'Frances',
  'John',
  'Leslie',
  'Niklaus',
];
const PHRASES = [
  'See you at 6?',
  'On my way',
  'Thanks!',
  'Can you call me?',
  'Lunch tomorrow?',
  'Running late',
  'Sounds good',
  'Did you get the file?',
  'Happy birthday!',
  'Where are you?',
];
/**
 * A page title is cut to this many characters. It travels in every screen_changed event, and
 * wait_for_events answers with up to 100 events at once: a search title of a full address bar
 * (5000 control characters, 13 bytes each in a result) made four of them too_large.
 */
const MAX_TITLE_CHARS = 100;
const KNOWN_TITLES: Record<string, string> = {
  'example.com': 'Example Domain',
  'www.example.com': 'Example Domain',
  'phonebridge.dev': 'phonebridge',
  'news.ycombinator.com': 'Hacker News',
};

export function packageOf(app: string): string {
  return APPS.find((a) => a.key === app || a.package === app)?.package ?? app;
}

const characters = (n: number) => `${n} character${n === 1 ? '' : 's'}`;
const inside = (b: Bounds, p: Point) => p.x >= b.left && p.x < b.right && p.y >= b.top && p.y < b.bottom;
const SINGLE_LINE_FIELDS = new Set(['browser.url', 'thread.compose']);

export class SimPhone {
  readonly width: number;
  readonly height: number;
  readonly seed: number;

  private readonly now: () => number;
  private readonly eventLogSize: number;
  private stack: Route[] = [{ screen: 'home' }];
  private focus: string | null = null;
  private menu: ContextMenu | null = null;
  private settings: Record<SettingName, boolean> = {
    wifi: true,
    bluetooth: false,
    airplane_mode: false,
    dark_mode: false,
  };
  private threads: Thread[];
  private drafts = new Map<string, string>();
  private listScroll = 0;
  private noteText = '';
  private urlDraft = '';
  private history: { url: string; title: string }[] = [{ url: 'about:blank', title: 'New tab' }];
  private notifications: Notification[] = [];
  private nextNotificationId = 1;
  private events: PhoneEvent[] = [];
  private seq = 0;
  private listeners = new Set<(e: PhoneEvent) => void>();
  /** What a gesture on a screen may do to the phone (screens.ts binds these to elements). */
  private readonly actions: PhoneActions = {
    launch: (app) => this.launch(app),
    openThread: (threadId) => this.push({ screen: 'thread', threadId }),
    back: () => this.back(),
    goHome: () => this.goHome(),
    openMenu: (anchor, items) => this.openMenu(anchor, items),
    closeMenu: () => this.closeMenu(),
    focusField: (id) => this.focusField(id),
    toggle: (name) => this.toggle(name),
    navigate: (input) => this.navigate(input),
    send: () => this.send(),
    scrollList: (offset) => {
      this.listScroll = offset;
    },
    deleteThread: (threadId) => {
      this.threads = this.threads.filter((t) => t.id !== threadId);
      // A shorter list is not left scrolled past its end.
      this.listScroll = Math.min(this.listScroll, maxListScroll(this.height, this.threads.length));
    },
    clearNote: () => {
      this.noteText = '';
    },
    dismissNotification: (id) => {
      this.notifications = this.notifications.filter((n) => n.id !== id);
    },
    clearNotifications: () => {
      this.notifications = [];
    },
  };

  constructor(opts: SimPhoneOptions = {}) {
    this.seed = opts.seed ?? 1;
    this.width = opts.width ?? 1080;
    this.height = opts.height ?? 2400;
    this.now = opts.now ?? Date.now;
    this.eventLogSize = opts.eventLogSize ?? 1000;
    const random = prng(this.seed);
    const names = [...CONTACTS];
    for (let i = names.length - 1; i > 0; i--) {
      const j = Math.floor(random() * (i + 1));
      [names[i], names[j]] = [names[j], names[i]];
    }
    this.threads = names.slice(0, 12).map((contact, i) => ({
      id: `t${i + 1}`,
      contact,
      messages: Array.from({ length: 1 + Math.floor(random() * 3) }, (_, j) => ({
        from: j % 2 === 0 ? ('them' as const) : ('me' as const),
        text: PHRASES[Math.floor(random() * PHRASES.length)],
      })),
    }));
  }

  // ---- what can be observed -------------------------------------------------

  get foregroundApp(): string {
    return this.appOf(this.route);
  }

  get screen(): string {
    return this.route.screen;
  }

  /** Title of what is on screen: app label, contact, or page title. */
  get title(): string {
    const r = this.route;
    if (r.screen === 'home') return 'Home';
    if (r.screen === 'shade') return 'Notifications';
    if (r.screen === 'thread') return this.thread(r.threadId).contact;
    if (r.screen === 'browser') return this.page.title;
    return APPS.find((a) => a.key === r.screen)!.label;
  }

  get focusedElementId(): string | null {
    return this.focus;
  }

  get darkMode(): boolean {
    return this.settings.dark_mode;
  }

  get cursor(): number {
    return this.seq;
  }

  get installedApps(): { package: string; label: string }[] {
    return APPS.map((a) => ({ package: a.package, label: a.label }));
  }

  /** A plain-data view of the whole state, for exact assertions in tests. */
  snapshot() {
    return {
      app: this.foregroundApp,
      screen: this.screen,
      title: this.title,
      focus: this.focus,
      menu: this.menu ? this.menu.items.map((i) => i.id) : null,
      settings: { ...this.settings },
      note: this.noteText,
      browser: { ...this.page, draft: this.urlDraft },
      threads: this.threads.map((t) => ({ id: t.id, contact: t.contact, messages: t.messages.length })),
      notifications: this.notifications.map((n) => ({ ...n })),
      listScroll: this.listScroll,
      cursor: this.seq,
    };
  }

  elements(): UiElement[] {
    return this.layout().map(({ onTap: _t, onHold: _h, scrollBy: _s, ...element }) => element);
  }

  findElement(id: string): UiElement | undefined {
    return this.elements().find((e) => e.id === id);
  }

  eventsSince(cursor: number, types?: readonly EventType[]): PhoneEvent[] {
    return this.events.filter((e) => e.seq > cursor && (!types || types.includes(e.type)));
  }

  /** Subscribe to new events; returns the unsubscribe function. */
  onEvent(listener: (e: PhoneEvent) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /** How many subscribers are waiting (lets tests prove a cancelled wait cleaned up). */
  get listenerCount(): number {
    return this.listeners.size;
  }

  // ---- what can be done -----------------------------------------------------

  tap(target: Point | { elementId: string }): ActEffect {
    return this.act(() => {
      const point = this.resolve(target);
      const node = this.hit(point, (n) => !!n.onTap);
      if (!node) return { effect: 'nothing to tap there', elementId: null, point };
      if (!node.enabled) throw new SimError('element_disabled', `element ${node.id} is disabled`);
      return { effect: node.onTap!(), elementId: node.id, point };
    });
  }

  hold(target: Point | { elementId: string }): ActEffect {
    return this.act(() => {
      const point = this.resolve(target);
      const node = this.hit(point, (n) => !!n.onHold || !!n.onTap);
      if (!node?.onHold) return { effect: 'no context menu here', elementId: node?.id ?? null, point };
      if (!node.enabled) throw new SimError('element_disabled', `element ${node.id} is disabled`);
      return { effect: node.onHold(), elementId: node.id, point };
    });
  }

  swipe(from: Point, to: Point): ActEffect {
    return this.act(() => {
      this.checkPoint(from);
      this.checkPoint(to);
      const dx = to.x - from.x;
      const dy = to.y - from.y;
      if (from.y < STATUS_H && dy > 200 && this.route.screen !== 'shade') {
        this.menu = null;
        this.push({ screen: 'shade' });
        return { effect: 'opened the notification shade', elementId: 'status_bar', point: from };
      }
      const node = this.hit(from, (n) => !!n.scrollBy);
      if (node && Math.abs(dy) > Math.abs(dx))
        return { effect: node.scrollBy!(from.y - to.y), elementId: node.id, point: from };
      return { effect: 'nothing to scroll', elementId: null, point: from };
    });
  }

  /** Swipe across an element; `direction` is where the finger moves. */
  swipeElement(elementId: string, direction: 'up' | 'down' | 'left' | 'right'): ActEffect {
    const b = this.requireElement(elementId).bounds;
    const c = center(b);
    const half = { x: Math.floor((b.right - b.left) * 0.3), y: Math.floor((b.bottom - b.top) * 0.3) };
    const d = { up: [0, -1], down: [0, 1], left: [-1, 0], right: [1, 0] }[direction];
    return this.swipe(
      { x: c.x - d[0] * half.x, y: c.y - d[1] * half.y },
      { x: c.x + d[0] * half.x, y: c.y + d[1] * half.y },
    );
  }

  typeText(text: string, elementId?: string): ActEffect {
    return this.act(() => {
      if (elementId !== undefined) this.focusField(elementId);
      if (!this.focus) throw new SimError('no_focused_field', 'no text field has focus; tap one or pass elementId');
      // Counted in characters as the tool's maxLength counts them (code points); the field
      // itself holds UTF-16 units, as Android's maxLength does.
      const dropped = this.insert(text);
      const sent = codePoints(text);
      const effect = dropped
        ? `typed ${sent - dropped} of ${characters(sent)} into ${this.focus} (it holds at most ${MAX_FIELD_CHARS} UTF-16 units; an emoji takes two)`
        : `typed ${characters(sent)} into ${this.focus}`;
      return { effect, elementId: this.focus, point: null };
    });
  }

  pressKey(key: Key): ActEffect {
    return this.act(() => ({ effect: this.key(key), elementId: this.focus, point: null }));
  }

  openApp(pkg: string): ActEffect {
    return this.act(() => {
      const app = APPS.find((a) => a.package === pkg);
      if (!app)
        throw new SimError('app_not_found', `no app ${pkg}; installed: ${APPS.map((a) => a.package).join(', ')}`);
      this.launch(app.key);
      return { effect: `opened ${app.package}`, elementId: null, point: null };
    });
  }

  injectNotification(n: { app: string; title: string; text: string }): PhoneEvent {
    const app = packageOf(n.app);
    // Android keeps at most 5 * 1024 characters of a notification's title and text
    // (Notification.safeCharSequence); so one event always fits one wait_for_events result.
    const title = wellFormed(head(n.title, NOTIFICATION_TEXT_MAX));
    const text = wellFormed(head(n.text, NOTIFICATION_TEXT_MAX));
    this.notifications.push({ id: this.nextNotificationId++, app, title, text });
    return this.emit({ type: 'notification', app, title, text });
  }

  // ---- internals: navigation, events ----------------------------------------

  private get route(): Route {
    return this.stack[this.stack.length - 1];
  }

  private get page() {
    return this.history[this.history.length - 1];
  }

  private appOf(r: Route): string {
    if (r.screen === 'home') return LAUNCHER_PACKAGE;
    if (r.screen === 'shade') return SYSTEM_UI_PACKAGE;
    if (r.screen === 'thread') return packageOf('messages');
    return packageOf(r.screen);
  }

  /** Identity of the visible screen: a change of it is a screen_changed event. */
  private screenKey(): string {
    const r = this.route;
    if (r.screen === 'thread') return `thread:${r.threadId}`;
    if (r.screen === 'browser') return `browser:${this.page.url}`;
    return r.screen;
  }

  /** Runs one action and emits app/screen changes it caused. */
  private act(action: () => ActEffect): ActEffect {
    const app = this.foregroundApp;
    const key = this.screenKey();
    const result = action();
    if (this.foregroundApp !== app) this.emit({ type: 'app_changed', app: this.foregroundApp, previousApp: app });
    if (this.screenKey() !== key)
      this.emit({ type: 'screen_changed', app: this.foregroundApp, screen: this.screen, title: this.title });
    return result;
  }

  private emit(e: Omit<PhoneEvent, 'seq' | 'at'>): PhoneEvent {
    const event: PhoneEvent = { seq: ++this.seq, at: this.now(), ...e };
    this.events.push(event);
    if (this.events.length > this.eventLogSize) this.events.shift();
    for (const listener of [...this.listeners]) listener(event);
    return event;
  }

  private push(route: Route) {
    this.focus = null;
    this.stack.push(route);
  }

  private launch(key: AppKey) {
    this.menu = null;
    this.focus = null;
    this.stack = [{ screen: 'home' }, { screen: key }];
  }

  private back(): string {
    if (this.menu) return this.closeMenu();
    if (this.route.screen === 'browser' && this.history.length > 1) {
      this.history.pop();
      this.focus = null;
      return `went back to ${this.page.url}`;
    }
    if (this.stack.length === 1) return 'already home';
    this.stack.pop();
    this.focus = null;
    return `back to ${this.screen}`;
  }

  private goHome(): string {
    this.menu = null;
    this.focus = null;
    this.stack = [{ screen: 'home' }];
    return 'went home';
  }

  private closeMenu(): string {
    this.menu = null;
    return 'closed the menu';
  }

  private openMenu(anchor: Point, items: ContextMenu['items']): string {
    this.menu = { anchor, items };
    return `opened a menu: ${items.map((i) => i.text).join(', ')}`;
  }

  private thread(id: string): Thread {
    return this.threads.find((t) => t.id === id)!;
  }

  // ---- internals: input ------------------------------------------------------

  private checkPoint(p: Point) {
    if (p.x < 0 || p.y < 0 || p.x >= this.width || p.y >= this.height) {
      throw new SimError('out_of_bounds', `(${p.x}, ${p.y}) is outside the ${this.width}x${this.height} screen`);
    }
  }

  private requireElement(id: string): UiNode {
    const node = this.layout().find((n) => n.id === id);
    if (!node) throw new SimError('element_not_found', `no element ${id} on screen ${this.screen}`);
    return node;
  }

  private resolve(target: Point | { elementId: string }): Point {
    if ('elementId' in target) return center(this.requireElement(target.elementId).bounds);
    this.checkPoint(target);
    return target;
  }

  /** Topmost element under the point that accepts the gesture (later in layout = drawn on top). */
  private hit(p: Point, accepts: (n: UiNode) => boolean): UiNode | undefined {
    return this.layout()
      .reverse()
      .find((n) => inside(n.bounds, p) && accepts(n));
  }

  private focusField(id: string): string {
    const node = this.requireElement(id);
    if (node.role !== 'textfield')
      throw new SimError('not_a_text_field', `element ${id} is a ${node.role}, not a text field`);
    if (this.focus === id) return `${id} already has focus`;
    this.focus = id;
    if (id === 'browser.url') this.urlDraft = ''; // like select-all: typing replaces the URL
    return `focused ${id}`;
  }

  private fieldText(id: string): string {
    if (id === 'notes.body') return this.noteText;
    if (id === 'browser.url') return this.urlDraft;
    return this.drafts.get((this.route as { threadId: string }).threadId) ?? '';
  }

  private setFieldText(id: string, text: string) {
    if (id === 'notes.body') this.noteText = text;
    else if (id === 'browser.url') this.urlDraft = text;
    else this.drafts.set((this.route as { threadId: string }).threadId, text);
  }

  /** Inserts at the end of the focused field; returns how many characters (code points) did not fit. */
  private insert(text: string): number {
    const id = this.focus!;
    const clean = SINGLE_LINE_FIELDS.has(id) ? text.replace(/[\r\n]/g, '') : text;
    const current = this.fieldText(id);
    // Whole characters only, as Android's LengthFilter keeps them: never half a surrogate pair.
    const kept = head(clean, MAX_FIELD_CHARS - current.length);
    this.setFieldText(id, current + kept);
    return codePoints(clean) - codePoints(kept);
  }

  private key(key: Key): string {
    switch (key) {
      case 'BACK':
        return this.back();
      case 'HOME':
        return this.goHome();
      case 'ESCAPE':
        if (this.menu) return this.closeMenu();
        if (!this.focus) return 'nothing to dismiss';
        this.focus = null;
        return 'cleared focus';
      case 'TAB': {
        const fields = this.layout()
          .filter((n) => n.role === 'textfield' && n.enabled)
          .map((n) => n.id);
        if (fields.length === 0) return 'nothing to focus';
        const next = fields[(fields.indexOf(this.focus ?? '') + 1) % fields.length];
        return this.focusField(next);
      }
      case 'SPACE':
        if (!this.focus) return 'no focused field';
        if (this.insert(' ')) return `${this.focus} is full`;
        return `typed a space into ${this.focus}`;
      case 'DEL': {
        if (!this.focus) return 'no focused field';
        const text = this.fieldText(this.focus);
        if (!text) return 'field already empty';
        // One code point, as Android's backspace deletes: never half a surrogate pair.
        this.setFieldText(this.focus, head(text, text.length - 1));
        return `deleted one character from ${this.focus}`;
      }
      case 'ENTER':
        if (this.focus === 'browser.url') return this.navigate(this.urlDraft);
        if (this.focus === 'thread.compose') return this.send();
        if (this.focus === 'notes.body') {
          if (this.insert('\n')) return 'notes.body is full';
          return 'new line in notes.body';
        }
        return 'nothing to submit';
    }
  }

  private toggle(name: SettingName): string {
    this.settings[name] = !this.settings[name];
    if (name === 'airplane_mode' && this.settings.airplane_mode) {
      this.settings.wifi = false;
      this.settings.bluetooth = false;
    }
    return `${name} ${this.settings[name] ? 'on' : 'off'}`;
  }

  private navigate(input: string): string {
    // The model takes any string (its own API has no schema); a URL is made of well-formed text.
    const typed = wellFormed(input).trim();
    if (!typed) return 'nothing to open';
    let url: URL;
    try {
      url = new URL(/^[a-z][a-z0-9+.-]*:/i.test(typed) ? typed : `https://${typed}`);
      if (!typed.includes('.') && !typed.includes(':')) throw new Error('not a host');
    } catch {
      url = new URL(`https://www.google.com/search?q=${encodeURIComponent(typed)}`);
    }
    const suffix = ' - Search';
    const title =
      url.searchParams.has('q') && url.hostname === 'www.google.com'
        ? `${cut(url.searchParams.get('q')!, MAX_TITLE_CHARS - suffix.length)}${suffix}`
        : cut(KNOWN_TITLES[url.hostname] ?? url.hostname, MAX_TITLE_CHARS);
    this.history.push({ url: url.href, title });
    this.focus = null;
    this.urlDraft = '';
    return `loaded ${url.href}`;
  }

  private send(): string {
    const r = this.route as { threadId: string };
    const text = this.drafts.get(r.threadId) ?? '';
    if (!text) return 'nothing to send';
    this.thread(r.threadId).messages.push({ from: 'me', text });
    this.drafts.delete(r.threadId);
    return `sent "${text}"`;
  }

  // ---- internals: layout -----------------------------------------------------

  /** The screen as elements in drawing order, each with what a gesture on it does (screens.ts). */
  private layout(): UiNode[] {
    return layoutScreen(this.view(), this.actions);
  }

  /** What the screens read: the current state, by reference. */
  private view(): PhoneView {
    return {
      width: this.width,
      height: this.height,
      route: this.route,
      focus: this.focus,
      menu: this.menu,
      apps: APPS,
      settings: this.settings,
      notifications: this.notifications,
      threads: this.threads,
      drafts: this.drafts,
      listScroll: this.listScroll,
      noteText: this.noteText,
      urlDraft: this.urlDraft,
      page: this.page,
    };
  }
}
