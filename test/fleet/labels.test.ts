import { describe, expect, it } from 'vitest';
import {
  factLabels,
  formatSelector,
  LabelError,
  matches,
  parseLabelArgs,
  parseLabelList,
  parseSelector,
  validateLabels,
} from '../../src/fleet/labels.ts';

describe('labels', () => {
  it('accepts Kubernetes label syntax and refuses the rest with a reason', () => {
    expect(validateLabels({ site: 'berlin', 'example.com/rack': 'a-1', empty: '' })).toBeTruthy();
    for (const [k, v, why] of [
      ['-site', 'x', /name must be/],
      ['site', 'berlin!', /value must be/],
      ['Example.com/x', 'y', /prefix must be a DNS subdomain/],
      ['a'.repeat(64), 'y', /1–63/],
      ['site', 'x'.repeat(64), /at most 63/],
      ['phonebridge.dev/model', 'pixel', /reserved/],
    ] as const)
      expect(() => validateLabels({ [k]: v }), `${k}=${v}`).toThrow(why);
  });

  it('reads k=v to set and k- to remove, and refuses a key given twice', () => {
    expect(parseLabelArgs(['site=berlin', 'model=pixel8', 'old-'])).toEqual({
      set: { site: 'berlin', model: 'pixel8' },
      remove: ['old'],
    });
    expect(() => parseLabelArgs(['site=a', 'site-'])).toThrow(/given twice/);
    expect(() => parseLabelArgs(['site'])).toThrow(/expected k=v/);
    expect(() => parseLabelArgs([])).toThrow(LabelError);
    // Keys an object inherits are not "given twice"; "__proto__" is a bad key, not a lost one.
    expect(parseLabelArgs(['constructor=x']).set).toEqual({ constructor: 'x' });
    expect(() => parseLabelArgs(['__proto__=x'])).toThrow(/name must be/);
  });

  it('reads --labels k=v,… and refuses a key given twice as parseLabelArgs does', () => {
    expect(parseLabelList(' site=berlin, model=pixel8 ')).toEqual({ site: 'berlin', model: 'pixel8' });
    expect(parseLabelList(undefined)).toEqual({});
    expect(() => parseLabelList('site=berlin,site=paris')).toThrow('label "site" given twice');
    expect(() => parseLabelList('site=berlin, site =berlin')).toThrow('label "site" given twice');
    expect(() => parseLabelList('__proto__=x')).toThrow(/name must be/);
  });
});

describe('selectors', () => {
  const phone = { site: 'berlin', model: 'pixel8', 'phonebridge.dev/app-version': '1.2.0' };

  it('parses equality, inequality, set and existence requirements and prints them back', () => {
    const sel = parseSelector('site=berlin, model!=pixel7,tier in (a, b),!broken,model');
    expect(sel).toEqual([
      { key: 'site', op: 'eq', value: 'berlin' },
      { key: 'model', op: 'neq', value: 'pixel7' },
      { key: 'tier', op: 'in', values: ['a', 'b'] },
      { key: 'broken', op: 'absent' },
      { key: 'model', op: 'exists' },
    ]);
    expect(formatSelector(sel)).toBe('site=berlin,model!=pixel7,tier in (a,b),!broken,model');
    expect(parseSelector(formatSelector(sel))).toEqual(sel);
    expect(parseSelector('')).toEqual([]);
  });

  it('matches like Kubernetes: != and notin also match a phone without the label', () => {
    expect(matches(parseSelector('site=berlin,model=pixel8'), phone)).toBe(true);
    expect(matches(parseSelector('site=paris'), phone)).toBe(false);
    expect(matches(parseSelector('tier!=gold'), phone)).toBe(true);
    expect(matches(parseSelector('tier notin (gold)'), phone)).toBe(true);
    expect(matches(parseSelector('tier in (gold)'), phone)).toBe(false);
    expect(matches(parseSelector('site in (paris,berlin)'), phone)).toBe(true);
    expect(matches(parseSelector('!site'), phone)).toBe(false);
    expect(matches(parseSelector('phonebridge.dev/app-version=1.2.0'), phone)).toBe(true);
    expect(matches([], {})).toBe(true);
  });

  it('refuses malformed selectors with the part it could not read', () => {
    expect(() => parseSelector('site=berlin,,model=x')).toThrow(/empty requirement/);
    expect(() => parseSelector('site in ()')).toThrow(/at least one value/);
    expect(() => parseSelector('site in (a')).toThrow(/unbalanced/);
    expect(() => parseSelector('si te=x')).toThrow(/cannot read/);
    expect(() => parseSelector('site=ber lin')).toThrow(/cannot read|value/);
  });

  it("derives the phone's facts from its initialize result, as valid label values", () => {
    expect(
      factLabels({
        protocolVersion: '2025-11-25',
        serverInfo: { name: 'phonebridge sim', version: '0.1.0' },
        _meta: { 'phonebridge/device': { model: 'Pixel 8', android: 15 } },
      }),
    ).toEqual({
      'phonebridge.dev/app': 'phonebridge-sim',
      'phonebridge.dev/app-version': '0.1.0',
      'phonebridge.dev/protocol': '2025-11-25',
      'phonebridge.dev/model': 'Pixel-8',
      'phonebridge.dev/android': '15',
    });
    expect(factLabels(null)).toEqual({});
  });
});
