// What each screen of the simulated phone shows and what a finger does to it. The phone
// (model.ts) owns the state and its actions; a layout pass reads a PhoneView of that state and
// binds PhoneActions to the elements, so this file never changes state except through them.
import type {
  APPS,
  AppKey,
  Bounds,
  ContextMenu,
  Notification,
  Point,
  Route,
  SettingName,
  Thread,
  UiElement,
} from './model.ts';
import { cut } from '../text.ts';

/** An element plus what a finger does to it; `SimPhone.elements()` hands out the element only. */
export interface UiNode extends UiElement {
  onTap?: () => string;
  onHold?: () => string;
  scrollBy?: (dy: number) => string;
}

/**
 * What a layout pass reads, as it is when the pass runs. A gesture's handler runs right after
 * the pass that made it; a menu item runs later, so it only calls actions.
 */
export interface PhoneView {
  readonly width: number;
  readonly height: number;
  readonly route: Route;
  readonly focus: string | null;
  readonly menu: ContextMenu | null;
  readonly apps: typeof APPS;
  readonly settings: Readonly<Record<SettingName, boolean>>;
  readonly notifications: readonly Notification[];
  readonly threads: readonly Thread[];
  /** Compose drafts by thread id. */
  readonly drafts: ReadonlyMap<string, string>;
  /** How far the conversation list is scrolled, in pixels. */
  readonly listScroll: number;
  readonly noteText: string;
  readonly urlDraft: string;
  readonly page: { url: string; title: string };
}

/** What a gesture on a screen can make the phone do; those returning a string say what they did. */
export interface PhoneActions {
  launch(app: AppKey): void;
  openThread(threadId: string): void;
  back(): string;
  goHome(): string;
  openMenu(anchor: Point, items: ContextMenu['items']): string;
  closeMenu(): string;
  focusField(id: string): string;
  toggle(name: SettingName): string;
  navigate(input: string): string;
  send(): string;
  scrollList(offset: number): void;
  deleteThread(threadId: string): void;
  clearNote(): void;
  dismissNotification(id: number): void;
  clearNotifications(): void;
}

/**
 * A text field holds at most this many UTF-16 units; more are dropped, as Android's maxLength
 * does (model.ts insert). Unbounded, a few type_text calls made every observe_screen of the
 * screen too_large.
 */
export const MAX_FIELD_CHARS = 5000;
/**
 * The message text one screen shows, in all: what one field holds. A message is at most a
 * field long (it was a compose draft), but a screen shows many, and once JSON-escaped a
 * character costs up to 13 bytes of a result (a control character: 6 in structuredContent, 7
 * in the text block): four full bubbles of those, or four full previews, made every
 * observe_screen of the screen too_large. The conversation shows the newest messages within
 * it (a long message takes the room of several, as on a real screen); the list cuts each
 * preview to its share.
 */
const MESSAGE_CHARS_PER_SCREEN = MAX_FIELD_CHARS;

// Layout in screen pixels; derived from the screen size so other sizes still make sense.
/** Height of the status bar; a swipe down from it opens the notification shade. */
export const STATUS_H = 80;
const NAV_H = 120;
const ROW_H = 200;
const MARGIN = 40;

const SETTING_LABELS: Record<SettingName, string> = {
  wifi: 'Wi-Fi',
  bluetooth: 'Bluetooth',
  airplane_mode: 'Airplane mode',
  dark_mode: 'Dark mode',
};

export const center = (b: Bounds): Point => ({
  x: Math.floor((b.left + b.right) / 2),
  y: Math.floor((b.top + b.bottom) / 2),
});

type NewNode = Omit<UiNode, 'enabled' | 'focused' | 'parentId'> & Partial<Pick<UiNode, 'enabled' | 'parentId'>>;

/** One layout pass: the elements so far, in drawing order, and the content area between the bars. */
class Frame {
  readonly nodes: UiNode[] = [];
  readonly W: number;
  readonly H: number;
  readonly contentTop = STATUS_H;
  readonly contentBottom: number;

  constructor(private readonly view: PhoneView) {
    this.W = view.width;
    this.H = view.height;
    this.contentBottom = view.height - NAV_H;
  }

  add(n: NewNode) {
    this.nodes.push({ enabled: true, parentId: null, ...n, focused: this.view.focus === n.id });
  }

  /** The i-th full-width row below the heading (or below `top`). */
  row(i: number, top = this.contentTop + ROW_H): Bounds {
    return { left: 0, top: top + i * ROW_H, right: this.W, bottom: top + (i + 1) * ROW_H };
  }

  heading(id: string, text: string) {
    this.add({
      id,
      role: 'heading',
      text,
      bounds: { left: MARGIN, top: this.contentTop, right: this.W - MARGIN, bottom: this.contentTop + ROW_H },
    });
  }
}

/** How far the conversation list of `rows` conversations scrolls at most on a screen this high. */
export function maxListScroll(height: number, rows: number): number {
  const listHeight = height - NAV_H - (STATUS_H + ROW_H); // below the heading, above the nav bar
  return Math.max(0, rows * ROW_H - listHeight);
}

/** The screen as elements in drawing order, each with what a gesture on it does. */
export function layoutScreen(view: PhoneView, act: PhoneActions): UiNode[] {
  const f = new Frame(view);
  statusBar(f, view);
  const r = view.route;
  switch (r.screen) {
    case 'home':
      homeScreen(f, view, act);
      break;
    case 'settings':
      settingsScreen(f, view, act);
      break;
    case 'messages':
      messagesScreen(f, view, act);
      break;
    case 'thread':
      threadScreen(f, view, act, r.threadId);
      break;
    case 'notes':
      notesScreen(f, view, act);
      break;
    case 'browser':
      browserScreen(f, view, act);
      break;
    case 'shade':
      shadeScreen(f, view, act);
      break;
  }
  navBar(f, act);
  if (view.menu) contextMenu(f, view.menu, act);
  return f.nodes.map((n) => ({ ...n, bounds: roundBounds(n.bounds) }));
}

function statusBar(f: Frame, view: PhoneView) {
  const flags = [
    view.settings.airplane_mode && 'Airplane mode',
    view.settings.wifi && 'Wi-Fi',
    view.settings.bluetooth && 'Bluetooth',
  ].filter(Boolean);
  const count = view.notifications.length;
  f.add({
    id: 'status_bar',
    role: 'statusbar',
    text: [...flags, `${count} notification${count === 1 ? '' : 's'}`].join(' · '),
    bounds: { left: 0, top: 0, right: f.W, bottom: STATUS_H },
  });
}

function homeScreen(f: Frame, view: PhoneView, act: PhoneActions) {
  const { W, contentTop } = f;
  const cell = Math.floor(W / view.apps.length);
  view.apps.forEach((app, i) => {
    const bounds = { left: i * cell, top: contentTop + 160, right: (i + 1) * cell, bottom: contentTop + 460 };
    const open = () => {
      act.launch(app.key);
      return `opened ${app.package}`;
    };
    f.add({
      id: `app.${app.key}`,
      role: 'icon',
      text: app.label,
      bounds,
      onTap: open,
      onHold: () => act.openMenu(center(bounds), [{ id: 'menu.open', text: 'Open', run: open }]),
    });
  });
}

function settingsScreen(f: Frame, view: PhoneView, act: PhoneActions) {
  f.heading('settings.title', 'Settings');
  (Object.keys(SETTING_LABELS) as SettingName[]).forEach((name, i) =>
    f.add({
      id: `settings.${name}`,
      role: 'toggle',
      text: SETTING_LABELS[name],
      bounds: f.row(i),
      checked: view.settings[name],
      enabled: !(view.settings.airplane_mode && (name === 'wifi' || name === 'bluetooth')),
      onTap: () => act.toggle(name),
    }),
  );
}

function messagesScreen(f: Frame, view: PhoneView, act: PhoneActions) {
  const { W, contentTop, contentBottom } = f;
  f.heading('messages.title', 'Messages');
  const list: Bounds = { left: 0, top: contentTop + ROW_H, right: W, bottom: contentBottom };
  const maxScroll = maxListScroll(view.height, view.threads.length);
  // At most this many rows show at once (one partly at each end), each preview its share.
  const previewChars = Math.floor(MESSAGE_CHARS_PER_SCREEN / (Math.ceil((list.bottom - list.top) / ROW_H) + 1));
  // In range already: the phone keeps it so when the list gets shorter (model.ts deleteThread);
  // a layout pass only reads, so observing the screen changes nothing.
  const scroll = view.listScroll;
  f.add({
    id: 'messages.list',
    role: 'list',
    text: `${view.threads.length} conversation${view.threads.length === 1 ? '' : 's'}`,
    bounds: list,
    scrollBy: (dy) => {
      const next = Math.max(0, Math.min(maxScroll, scroll + dy));
      act.scrollList(next);
      return next === scroll ? 'list is already at its end' : `scrolled messages.list to ${next}`;
    },
  });
  view.threads.forEach((t, i) => {
    const top = list.top + i * ROW_H - scroll;
    if (top + ROW_H <= list.top || top >= list.bottom) return; // off screen: not in the tree, as on Android
    const bounds = {
      left: 0,
      top: Math.max(top, list.top),
      right: W,
      bottom: Math.min(top + ROW_H, list.bottom),
    };
    f.add({
      id: `messages.thread.${t.id}`,
      role: 'listitem',
      parentId: 'messages.list',
      bounds,
      text: `${t.contact}: ${cut(t.messages[t.messages.length - 1]?.text ?? '', previewChars)}`,
      onTap: () => {
        act.openThread(t.id);
        return `opened the conversation with ${t.contact}`;
      },
      onHold: () =>
        act.openMenu(center(bounds), [
          {
            id: 'menu.delete',
            text: 'Delete',
            run: () => {
              act.deleteThread(t.id);
              return `deleted the conversation with ${t.contact}`;
            },
          },
        ]),
    });
  });
}

function threadScreen(f: Frame, view: PhoneView, act: PhoneActions, threadId: string) {
  const { W, contentTop, contentBottom } = f;
  const t = view.threads.find((x) => x.id === threadId)!;
  f.heading('thread.title', t.contact);
  const composeTop = contentBottom - ROW_H;
  const fit = Math.floor((composeTop - contentTop - ROW_H) / ROW_H);
  // The newest that fit above the compose box and within the screen's message text (the newest
  // always: it was a draft, so it is within it); none on a screen too short for one.
  const shown: Thread['messages'] = [];
  let chars = 0;
  for (let i = t.messages.length - 1; i >= 0 && shown.length < fit; i--) {
    chars += t.messages[i].text.length;
    if (chars > MESSAGE_CHARS_PER_SCREEN && shown.length > 0) break;
    shown.unshift(t.messages[i]);
  }
  const first = t.messages.length - shown.length;
  shown.forEach((m, i) =>
    f.add({
      id: `thread.message.${first + i}`,
      role: 'text',
      text: `${m.from === 'me' ? 'Me' : t.contact}: ${m.text}`,
      bounds: {
        left: m.from === 'me' ? W / 4 : MARGIN,
        top: contentTop + ROW_H + i * ROW_H + 20,
        right: m.from === 'me' ? W - MARGIN : (W * 3) / 4,
        bottom: contentTop + ROW_H + (i + 1) * ROW_H - 20,
      },
    }),
  );
  f.add({
    id: 'thread.compose',
    role: 'textfield',
    text: view.drafts.get(t.id) ?? '',
    bounds: { left: MARGIN, top: composeTop + 30, right: W - 260, bottom: contentBottom - 30 },
    onTap: () => act.focusField('thread.compose'),
  });
  f.add({
    id: 'thread.send',
    role: 'button',
    text: 'Send',
    enabled: !!view.drafts.get(t.id),
    bounds: { left: W - 220, top: composeTop + 30, right: W - MARGIN, bottom: contentBottom - 30 },
    onTap: () => act.send(),
  });
}

function notesScreen(f: Frame, view: PhoneView, act: PhoneActions) {
  const { W, contentTop, contentBottom } = f;
  const clear = () => {
    act.clearNote();
    return 'cleared notes.body';
  };
  f.heading('notes.title', 'Notes');
  f.add({
    id: 'notes.body',
    role: 'textfield',
    text: view.noteText,
    bounds: { left: MARGIN, top: contentTop + ROW_H, right: W - MARGIN, bottom: contentBottom - ROW_H - 20 },
    onTap: () => act.focusField('notes.body'),
    onHold: () =>
      act.openMenu({ x: W / 2, y: contentTop + 2 * ROW_H }, [{ id: 'menu.clear', text: 'Clear', run: clear }]),
  });
  f.add({
    id: 'notes.clear',
    role: 'button',
    text: 'Clear',
    enabled: view.noteText.length > 0,
    bounds: { left: MARGIN, top: contentBottom - ROW_H, right: W / 2, bottom: contentBottom - 40 },
    onTap: clear,
  });
}

function browserScreen(f: Frame, view: PhoneView, act: PhoneActions) {
  const { W, contentTop, contentBottom } = f;
  const bar = contentTop + 20;
  // While the address bar has focus it shows what is being typed, and Go opens that.
  const address = view.focus === 'browser.url' ? view.urlDraft : view.page.url;
  f.add({
    id: 'browser.url',
    role: 'textfield',
    text: address,
    bounds: { left: MARGIN, top: bar, right: W - 220, bottom: bar + 140 },
    onTap: () => act.focusField('browser.url'),
  });
  f.add({
    id: 'browser.go',
    role: 'button',
    text: 'Go',
    bounds: { left: W - 200, top: bar, right: W - MARGIN, bottom: bar + 140 },
    onTap: () => act.navigate(address),
  });
  f.add({
    id: 'browser.page.title',
    role: 'heading',
    text: view.page.title,
    bounds: { left: MARGIN, top: bar + 200, right: W - MARGIN, bottom: bar + 340 },
  });
  f.add({
    id: 'browser.page.body',
    role: 'text',
    text: view.page.url === 'about:blank' ? '' : `Content of ${view.page.url}`,
    bounds: { left: MARGIN, top: bar + 380, right: W - MARGIN, bottom: contentBottom - MARGIN },
  });
}

/** The notifications the shade shows, newest first. */
const SHADE_ROWS = 8;

function shadeScreen(f: Frame, view: PhoneView, act: PhoneActions) {
  const { W, contentBottom } = f;
  f.heading('shade.title', 'Notifications');
  // Each row gets its share of one screen's text, as the conversation list's previews do: eight
  // full 5 KiB notifications would make every observe_screen of the shade too_large.
  const rowChars = Math.floor(MESSAGE_CHARS_PER_SCREEN / SHADE_ROWS);
  view.notifications
    .slice(-SHADE_ROWS)
    .reverse()
    .forEach((n, i) =>
      f.add({
        id: `shade.notification.${n.id}`,
        role: 'listitem',
        text: cut(`${n.title}: ${n.text}`, rowChars),
        bounds: f.row(i),
        onTap: () => {
          act.dismissNotification(n.id);
          const app = view.apps.find((a) => a.package === n.app);
          if (!app) {
            act.back();
            return `dismissed notification ${n.id}`;
          }
          act.launch(app.key);
          return `opened ${app.package} from notification ${n.id}`;
        },
      }),
    );
  f.add({
    id: 'shade.clear',
    role: 'button',
    text: 'Clear all',
    enabled: view.notifications.length > 0,
    bounds: { left: W / 2, top: contentBottom - ROW_H, right: W - MARGIN, bottom: contentBottom - 40 },
    onTap: () => {
      act.clearNotifications();
      return 'cleared all notifications';
    },
  });
}

function navBar(f: Frame, act: PhoneActions) {
  const { W, H, contentBottom } = f;
  f.add({
    id: 'nav.back',
    role: 'button',
    text: 'Back',
    bounds: { left: 0, top: contentBottom, right: W / 2, bottom: H },
    onTap: () => act.back(),
  });
  f.add({
    id: 'nav.home',
    role: 'button',
    text: 'Home',
    bounds: { left: W / 2, top: contentBottom, right: W, bottom: H },
    onTap: () => act.goHome(),
  });
}

function contextMenu(f: Frame, menu: ContextMenu, act: PhoneActions) {
  const { W, H, contentBottom } = f;
  // The scrim catches taps outside the menu and closes it, as on Android.
  f.add({
    id: 'menu.scrim',
    role: 'overlay',
    text: '',
    bounds: { left: 0, top: 0, right: W, bottom: H },
    onTap: () => act.closeMenu(),
  });
  const left = Math.max(0, Math.min(W - 600, Math.floor(menu.anchor.x - 300)));
  const top = Math.max(STATUS_H, Math.min(contentBottom - menu.items.length * 160, Math.floor(menu.anchor.y)));
  f.add({
    id: 'menu',
    role: 'menu',
    text: '',
    bounds: { left, top, right: left + 600, bottom: top + menu.items.length * 160 },
  });
  menu.items.forEach((item, i) =>
    f.add({
      id: item.id,
      role: 'menuitem',
      text: item.text,
      parentId: 'menu',
      bounds: { left, top: top + i * 160, right: left + 600, bottom: top + (i + 1) * 160 },
      onTap: () => {
        act.closeMenu();
        return item.run();
      },
    }),
  );
}

function roundBounds(b: Bounds): Bounds {
  return { left: Math.round(b.left), top: Math.round(b.top), right: Math.round(b.right), bottom: Math.round(b.bottom) };
}
