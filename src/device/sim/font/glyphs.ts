// Text for the simulator's screenshots, in pure JavaScript: glyph coverage from the bundled
// atlas (atlas.ts, rasterized once from DejaVu Sans by scripts/gen-sim-font.ts), scaled to the
// requested pixel size by supersampling and blended onto an RGB raster. No font file, native
// module or download at run time.
import { Buffer } from 'node:buffer';
import { inflateSync } from 'node:zlib';
import { ATLAS_ASCENT, ATLAS_DATA, ATLAS_GLYPHS, ATLAS_HEIGHT, ATLAS_SIZE } from './atlas.ts';

interface Glyph {
  advance: number;
  left: number;
  width: number;
  /** Coverage 0..15, width × ATLAS_HEIGHT, row by row. */
  alpha: Uint8Array;
}

let glyphs: Map<string, Glyph> | undefined;
function atlas(): Map<string, Glyph> {
  if (glyphs) return glyphs;
  const packed = inflateSync(Buffer.from(ATLAS_DATA, 'base64'));
  const nibble = (i: number) => (i & 1 ? packed[i >> 1] & 15 : packed[i >> 1] >> 4);
  glyphs = new Map();
  for (const [ch, advance, left, width, offset] of ATLAS_GLYPHS) {
    const alpha = new Uint8Array(width * ATLAS_HEIGHT);
    for (let i = 0; i < alpha.length; i++) alpha[i] = nibble(offset + i);
    glyphs.set(ch, { advance, left, width, alpha });
  }
  return glyphs;
}

const glyphOf = (ch: string): Glyph => atlas().get(ch) ?? atlas().get('?')!;

/** Width in pixels of `text` at a font size of `px` pixels per em. */
export function textWidth(text: string, px: number): number {
  let w = 0;
  for (const ch of text) w += glyphOf(ch).advance;
  return (w * px) / ATLAS_SIZE;
}

/** Line height in pixels at `px` pixels per em (ascent plus descent). */
export const lineHeight = (px: number): number => (ATLAS_HEIGHT * px) / ATLAS_SIZE;

/** Where the text is drawn: an RGB raster, row-major, 3 bytes a pixel. */
export interface Raster {
  readonly width: number;
  readonly height: number;
  readonly pixels: Uint8Array;
}

/**
 * Draws one line of `text` with its top-left at (x, top), `px` pixels per em, clipped to
 * [clipLeft, clipRight) horizontally and the raster. Coverage is averaged over up to 4×4
 * samples per output pixel, so small sizes stay legible instead of aliasing.
 */
export function drawLine(
  raster: Raster,
  text: string,
  x: number,
  top: number,
  px: number,
  [r, g, b]: readonly [number, number, number],
  clipRight = raster.width,
): void {
  const s = px / ATLAS_SIZE;
  const n = Math.min(4, Math.max(1, Math.ceil(1 / s)));
  const step = 1 / (n * s);
  const yEnd = Math.min(raster.height, Math.ceil(top + ATLAS_HEIGHT * s));
  let pen = x;
  for (const ch of text) {
    const glyph = glyphOf(ch);
    const x0 = pen + glyph.left * s;
    const x1 = Math.min(clipRight, raster.width, Math.ceil(x0 + glyph.width * s));
    for (let dy = Math.max(0, Math.floor(top)); dy < yEnd; dy++) {
      for (let dx = Math.max(0, Math.floor(x0)); dx < x1; dx++) {
        let sum = 0;
        for (let sy = 0; sy < n; sy++) {
          const gy = Math.floor((dy - top) / s + (sy + 0.5) * step);
          if (gy < 0 || gy >= ATLAS_HEIGHT) continue;
          for (let sx = 0; sx < n; sx++) {
            const gx = Math.floor((dx - x0) / s + (sx + 0.5) * step);
            if (gx >= 0 && gx < glyph.width) sum += glyph.alpha[gy * glyph.width + gx];
          }
        }
        if (sum === 0) continue;
        const a = sum / (15 * n * n);
        const i = (dy * raster.width + dx) * 3;
        const p = raster.pixels;
        p[i] = Math.round(p[i] + (r - p[i]) * a);
        p[i + 1] = Math.round(p[i + 1] + (g - p[i + 1]) * a);
        p[i + 2] = Math.round(p[i + 2] + (b - p[i + 2]) * a);
      }
    }
    pen += glyph.advance * s;
  }
}

/** The baseline's distance below a line's top, at `px` pixels per em. */
export const ascent = (px: number): number => (ATLAS_ASCENT * px) / ATLAS_SIZE;

/**
 * Breaks `text` into lines no wider than `maxWidth` at `px` (at spaces; a word too long for a
 * line is cut), at most `maxLines`; a cut-off last line ends with an ellipsis.
 */
export function wrap(text: string, px: number, maxWidth: number, maxLines: number): string[] {
  if (maxLines < 1 || maxWidth <= 0) return [];
  const lines: string[] = [];
  let line = '';
  const words = text.split(/(\s+)/).filter((w) => w.length > 0);
  for (let i = 0; i < words.length; i++) {
    const word = line ? words[i] : words[i].trimStart();
    if (!word) continue;
    if (textWidth(line + word, px) <= maxWidth) {
      line += word;
      continue;
    }
    if (line.trim()) {
      lines.push(line.trimEnd());
      line = '';
      if (lines.length === maxLines) return ellipsize(lines, words.slice(i).join(''), px, maxWidth);
      i--; // the word starts the next line
      continue;
    }
    // One word wider than a line: cut it.
    let cut = '';
    for (const ch of word) {
      if (textWidth(cut + ch, px) > maxWidth) break;
      cut += ch;
    }
    lines.push(cut || word.slice(0, 1));
    if (lines.length === maxLines) return ellipsize(lines, word.slice(cut.length || 1), px, maxWidth);
    words[i] = word.slice(cut.length || 1);
    i--;
  }
  if (line.trim()) lines.push(line.trimEnd());
  return lines;
}

function ellipsize(lines: string[], rest: string, px: number, maxWidth: number): string[] {
  if (!rest.trim()) return lines;
  let last = lines[lines.length - 1];
  while (last && textWidth(`${last}…`, px) > maxWidth) last = last.slice(0, -1);
  lines[lines.length - 1] = `${last.trimEnd()}…`;
  return lines;
}
