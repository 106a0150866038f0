import { describe, expect, it } from 'vitest';
import { drawLine, lineHeight, textWidth, wrap } from './glyphs.ts';

describe('glyphs', () => {
  it('measures proportionally to the size, and wider text is wider', () => {
    expect(textWidth('Settings', 40)).toBeCloseTo(2 * textWidth('Settings', 20), 5);
    expect(textWidth('WWW', 40)).toBeGreaterThan(textWidth('iii', 40));
    expect(lineHeight(48)).toBeGreaterThan(48);
  });

  it('wraps at spaces, cuts a word too long for a line, and ends a cut-off text with an ellipsis', () => {
    const w = textWidth('Airplane mode', 40);
    expect(wrap('Airplane mode Airplane mode', 40, w + 1, 3)).toEqual(['Airplane mode', 'Airplane mode']);
    const two = wrap('Airplane mode Airplane mode Airplane mode', 40, w + 1, 2);
    expect(two).toHaveLength(2);
    expect(two[1]).toMatch(/^Airplane m.*…$/);
    for (const line of two) expect(textWidth(line, 40)).toBeLessThanOrEqual(w + 1);
    const cut = wrap('Supercalifragilistic', 40, textWidth('Super', 40) + 1, 5);
    expect(cut[0]).toBe('Super');
    expect(cut.join('')).toBe('Supercalifragilistic');
    expect(wrap('', 40, 100, 2)).toEqual([]);
  });

  it('draws ink inside the clip only, blended towards the colour', () => {
    const width = 200;
    const height = 60;
    const raster = { width, height, pixels: new Uint8Array(width * height * 3).fill(255) };
    drawLine(raster, 'Hello', 10, 5, 40, [0, 0, 0], 60);
    let inside = 0;
    let outside = 0;
    for (let y = 0; y < height; y++)
      for (let x = 0; x < width; x++) {
        const dark = raster.pixels[(y * width + x) * 3] < 128;
        if (dark && x < 60) inside++;
        if (dark && x >= 60) outside++;
      }
    expect(inside).toBeGreaterThan(50);
    expect(outside).toBe(0);
  });
});
