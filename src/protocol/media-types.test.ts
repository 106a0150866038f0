import { describe, expect, it } from 'vitest';
import { acceptsJson, isJsonContentType, postMediaRefusal } from './media-types.ts';

describe('isJsonContentType', () => {
  it('is the media type, in any case, with any parameters; never a substring', () => {
    for (const v of [
      'application/json',
      'Application/JSON',
      'application/json; charset=utf-8',
      ' application/json ;x=y',
    ])
      expect(isJsonContentType(v), v).toBe(true);
    for (const v of [
      undefined,
      '',
      'text/plain',
      'text/plain; a=application/json',
      'application/jsonx',
      'application/*',
    ])
      expect(isJsonContentType(v), String(v)).toBe(false);
  });
});

describe('acceptsJson', () => {
  it('takes no Accept, application/json and the ranges that cover it', () => {
    for (const v of [
      undefined,
      '',
      'application/json',
      'application/json, text/event-stream',
      'text/event-stream, application/json',
      '*/*',
      'application/*',
      'text/html, */*;q=0.1',
      'application/json;q=0.5',
    ])
      expect(acceptsJson(v), String(v)).toBe(true);
  });

  it('refuses an Accept that lists no range covering JSON, or rules it out with q=0', () => {
    for (const v of [
      'text/event-stream',
      'text/html',
      'image/*',
      'application/json;q=0, text/event-stream',
      '*/*, application/json;q=0', // the most specific range decides
      'application/*;q=0.0',
    ])
      expect(acceptsJson(v), v).toBe(false);
  });
});

describe('postMediaRefusal', () => {
  it('checks the Content-Type first (415), then the Accept (406), with bounded quotes', () => {
    expect(postMediaRefusal('text/plain', 'text/html')?.status).toBe(415);
    expect(postMediaRefusal('application/json', 'text/html')).toEqual({
      status: 406,
      error: {
        code: -32600,
        message:
          'Not Acceptable: POST /mcp answers application/json (and text/event-stream when the client lists it too); this request\'s Accept is "text/html"',
      },
    });
    expect(postMediaRefusal('application/json', undefined)).toBeUndefined();
    const long = postMediaRefusal(`text/${'x'.repeat(500)}`, undefined)!;
    expect(long.error.message.length).toBeLessThan(250);
  });
});
