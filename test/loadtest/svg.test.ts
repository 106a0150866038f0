import { describe, expect, it } from 'vitest';
import { XMLValidator, XMLParser } from 'fast-xml-parser';
import { barChart, escapeXml, lineChart, ticks } from '../../loadtest/lib/svg.ts';
import { answerFrame, answerIntact } from '../../loadtest/lib/payload.ts';

const valid = (svg: string) => XMLValidator.validate(svg);

describe('SVG charts', () => {
  it('writes well-formed SVG with escaped text and one polyline per series', () => {
    const svg = lineChart({ title: 'p99 <ms> & "quotes"', xLabel: "it's seconds", yLabel: 'ms' }, [
      {
        name: 'a<b',
        points: [
          [0, 1],
          [1, 5],
          [2, 3],
        ],
      },
      {
        name: 'c&d',
        points: [
          [0, 2],
          [2, 9],
        ],
      },
    ]);
    expect(valid(svg)).toBe(true);
    const doc = new XMLParser({ ignoreAttributes: false }).parse(svg);
    expect(doc.svg['@_xmlns']).toBe('http://www.w3.org/2000/svg');
    expect([doc.svg.polyline].flat()).toHaveLength(2);
    expect(svg).toContain('p99 &lt;ms&gt; &amp; &quot;quotes&quot;');
    expect(svg).not.toContain('a<b');
  });

  it('stays well-formed with no data, one point, NaN and huge values', () => {
    for (const points of [
      [],
      [[1, 1]],
      [
        [0, NaN],
        [1, 2],
      ],
      [
        [0, 1e12],
        [1, -5],
      ],
    ] as Array<Array<[number, number]>>) {
      expect(valid(lineChart({ title: 't', xLabel: 'x', yLabel: 'y' }, [{ name: 's', points }]))).toBe(true);
    }
    expect(
      valid(
        barChart({ title: 'b', xLabel: 'x', yLabel: 'y' }, [
          { label: '4 KiB', value: 3.2 },
          { label: '<x>', value: NaN },
        ]),
      ),
    ).toBe(true);
    expect(valid(barChart({ title: 'b', xLabel: 'x', yLabel: 'y' }, []))).toBe(true);
  });

  it('the validator is not a rubber stamp', () => {
    expect(valid('<svg><text>a < b</text></svg>')).not.toBe(true);
    expect(escapeXml(`<&>"'`)).toBe('&lt;&amp;&gt;&quot;&apos;');
  });

  it('picks round ticks', () => {
    expect(ticks(0, 100)).toEqual([0, 20, 40, 60, 80, 100]);
    expect(ticks(0, 0.7)).toEqual([0, 0.2, 0.4, 0.6, 0.8]);
    expect(ticks(5, 5).length).toBeGreaterThan(0);
  });
});

describe('checked payloads', () => {
  it('builds frames of an exact size and detects any change', () => {
    const frame = answerFrame(12345, 7, 256 * 1024);
    expect(Buffer.byteLength(frame)).toBe(256 * 1024);
    const result = JSON.parse(frame).result;
    expect(answerIntact(result, 7)).toBe(true);
    expect(answerIntact(result, 8)).toBe(false);
    const text: string = result.content[0].text;
    const flipped = text.slice(0, 1000) + (text[1000] === 'A' ? 'B' : 'A') + text.slice(1001);
    expect(answerIntact({ ...result, content: [{ type: 'text', text: flipped }] }, 7)).toBe(false);
    expect(answerIntact({ ...result, content: [{ type: 'text', text: text.slice(1) }] }, 7)).toBe(false);
  });
});
