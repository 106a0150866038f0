// Text the phone holds and hands back is well-formed UTF-16: never half a surrogate pair, which
// no UTF-8 encoder can write and strict JSON parsers refuse
// (docs/decisions/0218-tool-strings-are-well-formed-unicode.md).

const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

/** Says where `text` holds half a surrogate pair, e.g. "a lone surrogate U+D800 at index 1"; null when none. */
export function loneSurrogate(text: string): string | null {
  const found = LONE_SURROGATE.exec(text);
  if (!found) return null;
  const unit = found[0].charCodeAt(0).toString(16).toUpperCase();
  return `a lone surrogate U+${unit} at index ${found.index}`;
}

/** `text` with every lone surrogate replaced by U+FFFD, as the URL standard converts a string. */
export function wellFormed(text: string): string {
  return text.replace(new RegExp(LONE_SURROGATE, 'g'), '\uFFFD');
}

/** The first `max` UTF-16 units of `text` or one fewer: never the first half of a pair without the second. */
export function head(text: string, max: number): string {
  const end = Math.max(0, max);
  if (end >= text.length) return text;
  const c = text.charCodeAt(end - 1);
  return text.slice(0, c >= 0xd800 && c <= 0xdbff ? end - 1 : end);
}

/** At most `max` characters of `text`, the last of them an ellipsis when it was longer; never half a surrogate pair. */
export function cut(text: string, max: number): string {
  if (text.length <= max) return text;
  return `${head(text, max - 1)}…`;
}

/** How many characters `text` has as JSON Schema's maxLength counts them: code points, a pair is one. */
export function codePoints(text: string): number {
  return text.length - (text.match(/[\uD800-\uDBFF][\uDC00-\uDFFF]/g)?.length ?? 0);
}
