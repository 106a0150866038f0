// The simulated phone's screenshots read like a phone: Debian's tesseract OCR (/usr/bin/tesseract,
// package tesseract-ocr) reads, on a screenshot observe_screen returns, the text of the elements
// the same observe_screen reports. Over the official SDK client and the real tool surface.
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import { SimPhone } from '../../src/device/sim/model.ts';
import { callerOf, connect, ok } from '../../src/device/tools/in-memory.ts';

const execFileP = promisify(execFile);

/** Words as OCR can be held to them: letters and digits, lower case (punctuation like · reads as -). */
const words = (s: string) => s.toLowerCase().match(/[a-z0-9]+/g) ?? [];

async function ocr(png: Buffer): Promise<string[]> {
  const child = execFileP('tesseract', ['stdin', 'stdout', '--psm', '11'], { timeout: 60_000 });
  child.child.stdin!.end(png);
  return words((await child).stdout);
}

interface Element {
  id: string;
  role: string;
  text: string;
}

type Call = ReturnType<typeof callerOf>;

/** Each screen: how to get there, and which elements a reader must find (default: all with text). */
const SCREENS: Array<{ name: string; go: (call: Call) => Promise<unknown>; read?: (e: Element) => boolean }> = [
  { name: 'home (status bar, app labels, navigation)', go: async () => {} },
  { name: 'settings', go: (call) => call('open_app', { packageName: 'com.android.settings' }) },
  {
    name: 'settings in dark mode',
    go: async (call) => {
      await call('open_app', { packageName: 'com.android.settings' });
      await call('tap', { elementId: 'settings.dark_mode' });
    },
  },
  { name: 'messages (list items)', go: (call) => call('open_app', { packageName: 'com.android.messaging' }) },
  {
    name: 'notes with a context menu (dialog over a scrim): the dialog is what is legible',
    go: async (call) => {
      await call('open_app', { packageName: 'com.phonebridge.notes' });
      await call('type_text', { elementId: 'notes.body', text: 'Buy milk and eggs' });
      await call('hold', { elementId: 'notes.body' });
    },
    read: (e) => e.role === 'menuitem',
  },
];

describe('simulated phone screenshots, read by OCR', () => {
  it.each(SCREENS)(
    '$name',
    async ({ go, read }) => {
      const client = await connect({ phone: new SimPhone({ seed: 3 }), deviceId: 'ocr' });
      const call = callerOf(client);
      ok(await go(call).then(() => call('list_devices')));
      const result = await call('observe_screen', { screenshot: { include: true } });
      await client.close();
      const screen = ok<{ elements: Element[]; screenshot: { width: number } }>(result);
      const image = result.content.find((b) => b.type === 'image');
      expect(image?.type === 'image' && image.mimeType).toBe('image/png');
      const seen = await ocr(Buffer.from(image?.type === 'image' ? image.data : '', 'base64'));

      // A list's text describes the list (its items draw their own); a scrim has none.
      const expected = screen.elements.filter(
        (e) => e.text && e.role !== 'list' && e.role !== 'overlay' && (read ? read(e) : true),
      );
      expect(expected.length).toBeGreaterThan(0);
      const missing = expected
        .map((e) => ({ id: e.id, text: e.text, missing: words(e.text).filter((w) => !seen.includes(w)) }))
        .filter((m) => m.missing.length > 0);
      expect(missing, `OCR read: ${seen.join(' ')}`).toEqual([]);
    },
    60_000,
  );
});
