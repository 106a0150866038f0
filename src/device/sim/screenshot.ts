// Renders the simulated screen to a real PNG: flat rectangles per element and its text in real
// glyphs (font/glyphs.ts), so that a person or a model reading the screenshot reads what
// observe_screen reports. Flat colours compress well, but the size is checked anyway: a
// screenshot must fit one 256 KiB JSON-RPC frame together with its envelope.
import { Buffer } from 'node:buffer';
import { deflateSync } from 'node:zlib';
import { drawLine, lineHeight, textWidth, wrap } from './font/glyphs.ts';
import { SimError, type Role, type SimPhone, type UiElement } from './model.ts';

/** Largest base64 image we put in a result: 200 KiB leaves headroom in a 256 KiB frame. */
export const SCREENSHOT_BASE64_LIMIT = 200 * 1024;
/** Width used when the caller gives neither width nor scale: half the screen. */
export const DEFAULT_SCREENSHOT_SCALE = 0.5;

export interface ScreenshotRequest {
  /** Output width in pixels (height follows the screen's aspect ratio). Wins over scale. */
  width?: number;
  /** Output size relative to the screen, e.g. 0.5. */
  scale?: number;
}

export interface Screenshot {
  mimeType: 'image/png';
  width: number;
  height: number;
  /** PNG size in bytes before base64. */
  bytes: number;
  base64: string;
}

type Rgb = readonly [number, number, number];

const LIGHT: Record<Role | 'background' | 'glyph' | 'on' | 'off', Rgb> = {
  background: [250, 250, 250],
  glyph: [33, 33, 33],
  on: [26, 115, 232],
  off: [189, 189, 189],
  statusbar: [224, 224, 224],
  button: [208, 225, 249],
  icon: [66, 133, 244],
  heading: [250, 250, 250],
  text: [241, 243, 244],
  toggle: [255, 255, 255],
  textfield: [255, 255, 255],
  list: [250, 250, 250],
  listitem: [255, 255, 255],
  overlay: [120, 120, 120],
  menu: [255, 255, 255],
  menuitem: [255, 255, 255],
};
const DARK: typeof LIGHT = {
  background: [18, 18, 18],
  glyph: [232, 234, 237],
  on: [138, 180, 248],
  off: [95, 99, 104],
  statusbar: [32, 33, 36],
  // Dark enough under light text that OCR reads it as text on a surface (test/phone/screenshot-ocr.test.ts).
  button: [40, 48, 62],
  icon: [138, 180, 248],
  heading: [18, 18, 18],
  text: [40, 42, 46],
  toggle: [30, 30, 30],
  textfield: [40, 42, 46],
  list: [18, 18, 18],
  listitem: [30, 30, 30],
  overlay: [0, 0, 0],
  menu: [48, 49, 52],
  menuitem: [48, 49, 52],
};

/** An RGB raster with the drawing operations we need (text: font/glyphs.ts). */
class Canvas {
  readonly pixels: Uint8Array;
  constructor(
    readonly width: number,
    readonly height: number,
    background: Rgb,
  ) {
    this.pixels = new Uint8Array(width * height * 3);
    this.fill(0, 0, width, height, background);
  }

  /** Darkens a rectangle towards black by `amount` (0..1). */
  dim(left: number, top: number, right: number, bottom: number, amount: number) {
    const x0 = Math.max(0, Math.round(left));
    const x1 = Math.min(this.width, Math.round(right));
    for (let y = Math.max(0, Math.round(top)), y1 = Math.min(this.height, Math.round(bottom)); y < y1; y++) {
      for (let i = (y * this.width + x0) * 3, end = (y * this.width + x1) * 3; i < end; i++) {
        this.pixels[i] = Math.round(this.pixels[i] * (1 - amount));
      }
    }
  }

  fill(left: number, top: number, right: number, bottom: number, [r, g, b]: Rgb) {
    const x0 = Math.max(0, Math.round(left));
    const x1 = Math.min(this.width, Math.round(right));
    const y0 = Math.max(0, Math.round(top));
    const y1 = Math.min(this.height, Math.round(bottom));
    for (let y = y0; y < y1; y++) {
      for (let i = (y * this.width + x0) * 3, end = (y * this.width + x1) * 3; i < end; i += 3) {
        this.pixels[i] = r;
        this.pixels[i + 1] = g;
        this.pixels[i + 2] = b;
      }
    }
  }
}

/** Output size for a request, before any budget check. */
export function screenshotSize(phone: SimPhone, req: ScreenshotRequest): { width: number; height: number } {
  const width = Math.max(1, Math.round(req.width ?? phone.width * (req.scale ?? DEFAULT_SCREENSHOT_SCALE)));
  return { width, height: Math.max(1, Math.round((width * phone.height) / phone.width)) };
}

/**
 * Renders the current screen. Throws SimError('too_large') when the request is wider than the
 * screen (upscaling adds bytes, not information) or the encoding would exceed the frame budget.
 * The default size (no width or scale asked for) is a target, not a promise: a screen full of
 * text does not compress, and rather than refuse a caller who asked for no size, it steps down
 * until the image fits `limit` (the budget left beside the element tree, at most
 * SCREENSHOT_BASE64_LIMIT); the result says the size it came at.
 */
export function takeScreenshot(
  phone: SimPhone,
  req: ScreenshotRequest = {},
  limit = SCREENSHOT_BASE64_LIMIT,
): Screenshot {
  let { width, height } = screenshotSize(phone, req);
  if (width > phone.width) {
    throw new SimError(
      'too_large',
      `a ${width} px wide screenshot exceeds the maximum of ${phone.width} px (the screen width); ask for a smaller width or scale`,
    );
  }
  const budget = Math.min(limit, SCREENSHOT_BASE64_LIMIT);
  const fitted = req.width === undefined && req.scale === undefined;
  for (;;) {
    const png = encodePng(width, height, render(phone, width, height));
    const base64 = png.toString('base64');
    if (base64.length <= budget) return { mimeType: 'image/png', width, height, bytes: png.length, base64 };
    // Text strokes make the size grow about in proportion to the width: aim a little under.
    const next = Math.floor(width * Math.min(0.9, (0.95 * budget) / base64.length));
    if (!fitted || next < MIN_FITTED_WIDTH) {
      throw new SimError(
        'too_large',
        `the screenshot is ${base64.length} bytes of base64, over the ${budget} byte limit; ask for a smaller width or scale`,
      );
    }
    ({ width, height } = screenshotSize(phone, { width: next }));
  }
}

/** The default size steps down no further than this; below it a screenshot says too little. */
const MIN_FITTED_WIDTH = 100;

function render(phone: SimPhone, width: number, height: number): Uint8Array {
  const palette = phone.darkMode ? DARK : LIGHT;
  const k = width / phone.width;
  const canvas = new Canvas(width, height, palette.background);
  for (const e of phone.elements()) {
    if (e.role === 'icon') {
      drawIcon(canvas, e, k, palette);
      continue;
    }
    if (e.role === 'overlay') {
      // A scrim dims what is under it, as on Android; the dialog above it is drawn next.
      canvas.dim(e.bounds.left * k, e.bounds.top * k, e.bounds.right * k, e.bounds.bottom * k, 0.32);
      continue;
    }
    const { left, top, right, bottom } = e.bounds;
    const border = Math.max(1, 2 * k);
    if (e.role !== 'heading' && e.role !== 'list') canvas.fill(left * k, top * k, right * k, bottom * k, palette.off);
    canvas.fill(left * k + border, top * k + border, right * k - border, bottom * k - border, palette[e.role]);
    if (e.focused) canvas.fill(left * k, bottom * k - 3 * border, right * k, bottom * k, palette.on);
    if (e.checked !== undefined) drawSwitch(canvas, e, k, e.checked ? palette.on : palette.off);
    drawText(canvas, e, k, palette.glyph);
  }
  return canvas.pixels;
}

function drawSwitch(canvas: Canvas, e: UiElement, k: number, color: Rgb) {
  const { right, top, bottom } = e.bounds;
  const mid = (top + bottom) / 2;
  canvas.fill((right - 180) * k, (mid - 30) * k, (right - 40) * k, (mid + 30) * k, color);
}

/** Font size in screen pixels per em, by role: the status bar small, headings large. */
const TEXT_PX: Record<Role, number> = {
  statusbar: 34,
  heading: 60,
  button: 44,
  icon: 40,
  text: 42,
  toggle: 46,
  textfield: 44,
  list: 44,
  listitem: 44,
  overlay: 44,
  menu: 44,
  menuitem: 46,
};
const PAD = 40;

/**
 * The element's text, wrapped to its bounds: icon labels centred under the icon, a toggle's
 * label clear of its switch, a tall field's text from its top, anything else centred
 * vertically. A list's text describes the list (its items draw their own), so it is not drawn.
 */
function drawText(canvas: Canvas, e: UiElement, k: number, color: Rgb) {
  if (!e.text || e.role === 'list') return;
  const px = TEXT_PX[e.role];
  const { left, top, right, bottom } = e.bounds;
  const inner = { left: left + (e.role === 'icon' ? 12 : PAD), right: right - (e.checked !== undefined ? 220 : 24) };
  const lh = lineHeight(px);
  const room = Math.max(1, Math.floor((bottom - top - 16) / lh));
  const lines = wrap(e.text, px, inner.right - inner.left, room);
  const block = lines.length * lh;
  const y0 = e.role === 'icon' ? bottom - block - 24 : room > 3 ? top + 24 : top + (bottom - top - block) / 2;
  lines.forEach((line, i) => {
    const x = e.role === 'icon' ? (left + right - textWidth(line, px)) / 2 : inner.left;
    drawLine(canvas, line, x * k, (y0 + i * lh) * k, px * k, color, Math.ceil(inner.right * k));
  });
}

/** A launcher icon: a tile above its label on the home screen's background. */
function drawIcon(canvas: Canvas, e: UiElement, k: number, palette: typeof LIGHT) {
  const { left, top, right, bottom } = e.bounds;
  const labelRoom = lineHeight(TEXT_PX.icon) + 48;
  const size = Math.max(0, Math.min(right - left - 80, bottom - top - labelRoom - 24));
  const cx = (left + right) / 2;
  canvas.fill((cx - size / 2) * k, (top + 24) * k, (cx + size / 2) * k, (top + 24 + size) * k, palette.icon);
  drawText(canvas, e, k, palette.glyph);
}

// ---- PNG encoding (8-bit RGB, no interlace, filter 0 on every row) ------------

const CRC_TABLE = Array.from({ length: 256 }, (_, n) => {
  let c = n;
  for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
  return c >>> 0;
});

function crc32(data: Uint8Array): number {
  let c = 0xffffffff;
  for (const byte of data) c = CRC_TABLE[(c ^ byte) & 0xff] ^ (c >>> 8);
  return (c ^ 0xffffffff) >>> 0;
}

function chunk(type: string, data: Uint8Array): Buffer {
  const out = Buffer.alloc(12 + data.length);
  out.writeUInt32BE(data.length, 0);
  out.write(type, 4, 'ascii');
  out.set(data, 8);
  out.writeUInt32BE(crc32(out.subarray(4, 8 + data.length)), 8 + data.length);
  return out;
}

export function encodePng(width: number, height: number, rgb: Uint8Array): Buffer {
  const header = Buffer.alloc(13);
  header.writeUInt32BE(width, 0);
  header.writeUInt32BE(height, 4);
  header.set([8, 2, 0, 0, 0], 8); // bit depth 8, colour type RGB, deflate, filter 0, no interlace
  const stride = width * 3;
  const raw = Buffer.alloc((stride + 1) * height);
  for (let y = 0; y < height; y++) raw.set(rgb.subarray(y * stride, (y + 1) * stride), y * (stride + 1) + 1);
  return Buffer.concat([
    Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]),
    chunk('IHDR', header),
    chunk('IDAT', deflateSync(raw, { level: 9 })),
    chunk('IEND', new Uint8Array(0)),
  ]);
}
