import { crc32, inflateSync } from 'node:zlib';
import { describe, expect, it } from 'vitest';
import { SimPhone } from './model.ts';
import { SCREENSHOT_BASE64_LIMIT, encodePng, takeScreenshot } from './screenshot.ts';

/** Minimal PNG reader: checks the signature and every CRC, returns size and raw pixels. */
function readPng(png: Buffer) {
  expect(png.subarray(0, 8)).toEqual(Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]));
  const chunks: Record<string, Buffer> = {};
  for (let at = 8; at < png.length;) {
    const length = png.readUInt32BE(at);
    const type = png.toString('ascii', at + 4, at + 8);
    chunks[type] = png.subarray(at + 8, at + 8 + length);
    expect(png.readUInt32BE(at + 8 + length)).toBe(crc32(png.subarray(at + 4, at + 8 + length)));
    at += 12 + length;
  }
  const width = chunks.IHDR.readUInt32BE(0);
  const height = chunks.IHDR.readUInt32BE(4);
  return { width, height, raw: inflateSync(chunks.IDAT), hasEnd: 'IEND' in chunks };
}

describe('screenshot', () => {
  it('encodes a valid PNG whose pixels decode back', () => {
    const rgb = new Uint8Array([255, 0, 0, 0, 255, 0, 0, 0, 255, 9, 9, 9]);
    const png = readPng(encodePng(2, 2, rgb));
    expect(png).toMatchObject({ width: 2, height: 2, hasEnd: true });
    expect([...png.raw]).toEqual([0, 255, 0, 0, 0, 255, 0, /* row 2 */ 0, 0, 0, 255, 9, 9, 9]);
  });

  it('renders at the requested width or scale, keeping the aspect ratio', () => {
    const phone = new SimPhone();
    const half = takeScreenshot(phone);
    expect(half).toMatchObject({ mimeType: 'image/png', width: 540, height: 1200 });
    const png = readPng(Buffer.from(half.base64, 'base64'));
    expect(png).toMatchObject({ width: 540, height: 1200 });
    expect(png.raw.length).toBe((540 * 3 + 1) * 1200);
    expect(takeScreenshot(phone, { scale: 0.25 })).toMatchObject({ width: 270, height: 600 });
    expect(takeScreenshot(phone, { width: 100, scale: 0.9 })).toMatchObject({ width: 100, height: 222 });
  });

  it('changes when the screen changes (dark mode)', () => {
    const phone = new SimPhone();
    phone.openApp('com.android.settings');
    const light = takeScreenshot(phone, { width: 200 }).base64;
    phone.tap({ elementId: 'settings.dark_mode' });
    expect(takeScreenshot(phone, { width: 200 }).base64).not.toBe(light);
  });

  it('fits the budget at full size and refuses anything larger with too_large', () => {
    const phone = new SimPhone();
    phone.openApp('com.android.messaging');
    const full = takeScreenshot(phone, { scale: 1 });
    expect(full.width).toBe(1080);
    expect(full.base64.length).toBeLessThanOrEqual(SCREENSHOT_BASE64_LIMIT);
    expect(() => takeScreenshot(phone, { width: 1081 })).toThrow(expect.objectContaining({ code: 'too_large' }));
    expect(() => takeScreenshot(phone, { scale: 2 })).toThrow(expect.objectContaining({ code: 'too_large' }));
  });
});
