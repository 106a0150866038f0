// JSON the relay reads into values and writes out again without changing a number
// (docs/decisions/0249-numbers-kept-as-written.md). JSON.parse reads every number as a double:
// 12345678901234567890 comes back as 12345678901234567000, 1e400 as Infinity (written null), -0
// as 0. Where the relay must hold a message as values (the general request path, notifications,
// the phone's cached surface, the bus between nodes), a number that a double does not hold
// exactly is kept as its text (`JsonNumberText`) and written back as that text.
import { randomBytes } from 'node:crypto';

/** A JSON number no double holds exactly, as it was written. */
export class JsonNumberText {
  constructor(readonly text: string) {
    made = true;
  }
  /** JSON.stringify writes this mark; `stringifyJson` puts the number's text in its place. */
  toJSON(): string {
    return MARK + this.text;
  }
}

let made = false;
// Per process and never written out: a client cannot send a string that stringifyJson would
// turn into a number.
const MARK = `pbnum-${randomBytes(12).toString('hex')}:`;
const MARKED = new RegExp(`"${MARK}(-?[0-9][0-9.eE+-]*)"`, 'g');

/**
 * Where a number might not be exact: a value (after `:`, `,` or `[`) that is a negative zero,
 * has an exponent, or has 16 or more digits and points (a double holds 15 significant digits
 * for certain). Text inside a string may match too: it is then read by the slower exact parser,
 * which gives the same values as JSON.parse but for the inexact numbers.
 */
const MAYBE_INEXACT = /[:,[]\s*(?:-0|-?[0-9][0-9.]*[eE]|-?[0-9][0-9.]{15})/;

/** JSON.parse, but a number no double holds exactly is a JsonNumberText. Throws SyntaxError. */
export function parseJson(text: string): unknown {
  if (!MAYBE_INEXACT.test(text)) return JSON.parse(text);
  return new ExactParser(text).document();
}

/** JSON.stringify, with each JsonNumberText written as the number it was. */
export function stringifyJson(value: unknown): string {
  const s = JSON.stringify(value) as string | undefined;
  if (s === undefined) throw new TypeError('stringifyJson: no JSON text for this value');
  return made && s.includes(MARK) ? s.replace(MARKED, '$1') : s;
}

/** Whether the JSON number `text` is the number JSON.parse and JSON.stringify give back. */
export function isExactNumber(text: string): boolean {
  const n = Number(text);
  if (!Number.isFinite(n)) return false;
  // Zero is exact when every digit is (1e-400 is not zero, -0 is not 0).
  if (n === 0) return text[0] !== '-' && /^[0.]*$/.test(text.split(/[eE]/)[0]);
  return decimal(text) === decimal(String(n));
}

/** Whether two texts are JSON numbers of the same decimal value (1.0 and 1e0 are). */
export function sameJsonNumber(a: string, b: string): boolean {
  return JSON_NUMBER.test(a) && JSON_NUMBER.test(b) && decimal(a) === decimal(b);
}

const JSON_NUMBER = /^-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?$/;

/** A number's text as sign, significant digits and exponent ("-12e3" for -1.2e4 and -12000). */
function decimal(text: string): string {
  const negative = text[0] === '-';
  const e = text.search(/[eE]/);
  const mantissa = e < 0 ? text : text.slice(0, e);
  let exponent = e < 0 ? 0 : Number(text.slice(e + 1));
  const point = mantissa.indexOf('.');
  let digits = (point < 0 ? mantissa : mantissa.slice(0, point) + mantissa.slice(point + 1)).replace('-', '');
  if (point >= 0) exponent -= mantissa.length - point - 1;
  digits = digits.replace(/^0+/, '');
  const trimmed = digits.replace(/0+$/, '');
  exponent += digits.length - trimmed.length;
  return `${negative ? '-' : ''}${trimmed}e${exponent}`;
}

const NUMBER = /-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?/y;
const SPACE = /[ \t\n\r]*/y;

/** A JSON text read as JSON.parse reads it, inexact numbers kept as their text. */
class ExactParser {
  private at = 0;
  constructor(private readonly text: string) {}

  document(): unknown {
    const v = this.value(0);
    this.space();
    if (this.at !== this.text.length) this.fail();
    return v;
  }

  private value(depth: number): unknown {
    // As deep as JSON.parse goes before a RangeError would, far past any frame of 256 KiB's use.
    if (depth > 10_000) this.fail();
    this.space();
    const c = this.text[this.at];
    if (c === '{') return this.object(depth);
    if (c === '[') return this.array(depth);
    if (c === '"') return this.string();
    if (c === '-' || (c >= '0' && c <= '9')) return this.number();
    for (const [word, v] of WORDS)
      if (this.text.startsWith(word, this.at)) {
        this.at += word.length;
        return v;
      }
    return this.fail();
  }

  private object(depth: number): Record<string, unknown> {
    const o: Record<string, unknown> = {};
    this.at++;
    this.space();
    if (this.text[this.at] === '}') {
      this.at++;
      return o;
    }
    for (;;) {
      this.space();
      if (this.text[this.at] !== '"') this.fail();
      const key = this.string();
      this.space();
      if (this.text[this.at++] !== ':') this.fail();
      const v = this.value(depth + 1);
      // An own "__proto__" member, as JSON.parse makes it (an assignment would set the prototype).
      if (key === '__proto__')
        Object.defineProperty(o, key, { value: v, writable: true, enumerable: true, configurable: true });
      else o[key] = v;
      this.space();
      const c = this.text[this.at++];
      if (c === '}') return o;
      if (c !== ',') this.fail();
    }
  }

  private array(depth: number): unknown[] {
    const a: unknown[] = [];
    this.at++;
    this.space();
    if (this.text[this.at] === ']') {
      this.at++;
      return a;
    }
    for (;;) {
      a.push(this.value(depth + 1));
      this.space();
      const c = this.text[this.at++];
      if (c === ']') return a;
      if (c !== ',') this.fail();
    }
  }

  private string(): string {
    const start = this.at;
    const text = this.text;
    let i = start + 1;
    for (;;) {
      const c = text.charCodeAt(i);
      if (c === 0x22) break;
      if (c === 0x5c) i += 2;
      else if (c < 0x20 || Number.isNaN(c)) this.fail();
      else i++;
    }
    this.at = i + 1;
    // The escapes checked and decoded as JSON.parse does them.
    try {
      return JSON.parse(text.slice(start, i + 1)) as string;
    } catch {
      return this.fail();
    }
  }

  private number(): number | JsonNumberText {
    NUMBER.lastIndex = this.at;
    const m = NUMBER.exec(this.text);
    if (!m) this.fail();
    this.at = NUMBER.lastIndex;
    return isExactNumber(m[0]) ? Number(m[0]) : new JsonNumberText(m[0]);
  }

  private space(): void {
    SPACE.lastIndex = this.at;
    SPACE.exec(this.text);
    this.at = SPACE.lastIndex;
  }

  /** Where, not what: the text may be a client's or a phone's, kept out of logs. */
  private fail(): never {
    throw new SyntaxError(`invalid JSON at position ${this.at}`);
  }
}

const WORDS: Array<[string, unknown]> = [
  ['true', true],
  ['false', false],
  ['null', null],
];
