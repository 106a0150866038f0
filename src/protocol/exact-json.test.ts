import { describe, expect, it } from 'vitest';
import { isExactNumber, JsonNumberText, parseJson, stringifyJson } from './exact-json.ts';

const roundTrip = (text: string) => stringifyJson(parseJson(text));

describe('numbers a double does not hold', () => {
  it('are written back as they were written', () => {
    for (const n of [
      '12345678901234567890',
      '18446744073709551615',
      '-9007199254740993',
      '1e400',
      '-1e400',
      '-0',
      '-0.0',
      '1.0000000000000001',
      '4503599627370496.5',
      '1234567890.1234567',
      '1E-400',
    ])
      expect(roundTrip(`{"a":${n},"b":[${n}],"c":{"d":${n}}}`)).toBe(`{"a":${n},"b":[${n}],"c":{"d":${n}}}`);
  });

  it('are JsonNumberText in the values; the others plain numbers', () => {
    const v = parseJson('{"big":12345678901234567890,"small":42,"frac":0.1,"e":1e5,"top":9007199254740992}') as Record<
      string,
      unknown
    >;
    expect(v.big).toBeInstanceOf(JsonNumberText);
    expect((v.big as JsonNumberText).text).toBe('12345678901234567890');
    expect(v).toMatchObject({ small: 42, frac: 0.1, e: 100000, top: 9007199254740992 });
  });

  it('isExactNumber: the same decimal value, however written', () => {
    for (const t of [
      '1',
      '1.0',
      '1e0',
      '10E-1',
      '0.1',
      '100000',
      '1e21',
      '5e-324',
      '0',
      '0.0',
      '-5',
      '9007199254740992',
      '1.5',
    ])
      expect(isExactNumber(t), t).toBe(true);
    for (const t of ['-0', '-0e5', '9007199254740993', '1e400', '0.10000000000000000001', '2.5e-324'])
      expect(isExactNumber(t), t).toBe(false);
  });
});

describe('everything else reads as JSON.parse reads it', () => {
  const texts = [
    '{"a":1,"b":"x","c":[true,false,null],"d":{"e":-2.5e-3}}',
    '[1e5, 1234567890123, "a\\u00e9\\ud83d\\ude00\\n\\"", {}]',
    ' { "k" : [ ] , "l" : { } } ',
    '{"__proto__":{"x":1},"y":1e3}',
    '{"a":1,"a":2,"t":1e2}',
    '{"lone":"\\ud800","s":"2026-12-05","n":-0.5}',
    '"1e5"',
    '{"2":"b","1":"a","z":1e1}',
  ];
  it('the same values', () => {
    for (const t of texts) {
      const ours = parseJson(t);
      expect(ours).toStrictEqual(JSON.parse(t));
      expect(roundTrip(t)).toBe(JSON.stringify(JSON.parse(t)));
    }
    const proto = parseJson('{"__proto__":{"x":1},"y":1e3}') as Record<string, unknown>;
    expect(Object.getPrototypeOf(proto)).toBe(Object.prototype);
    expect(Object.keys(proto)).toEqual(['__proto__', 'y']);
  });

  it('refuses what JSON.parse refuses, and says where, not what', () => {
    const bad = [
      '{"a":1e5,}',
      '{"a":01e5}',
      '{"a":1e}',
      '{"a":"\\x"}',
      '{"a":"\u0001"}',
      '{"a":1e5',
      '[1e5]x',
      '{"a":.5e1}',
      '{"a":+1e1}',
      '{"a":"1e5}',
    ];
    for (const t of bad) {
      expect(() => JSON.parse(t), t).toThrow();
      expect(() => parseJson(t), t).toThrow(SyntaxError);
    }
  });

  it('a string that looks like a mark stays a string: the mark is random per process', () => {
    const v = parseJson('{"a":1e400}') as { a: JsonNumberText };
    const mark = JSON.stringify(v.a).slice(1, -1);
    expect(mark).toMatch(/^pbnum-[0-9a-f]{24}:1e400$/);
    const guessed = `pbnum-${'0'.repeat(24)}:5`;
    expect(stringifyJson({ s: guessed, n: v.a })).toBe(`{"s":"${guessed}","n":1e400}`);
  });
});
