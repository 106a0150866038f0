// HOSTED.md (Pages): "POST /account/signin/link | … goes to `next` (… only in the browser that
// asked for the link; elsewhere `/account`)". The browser keeps a binding (a hash of the code) for
// each of the last few links it asked for in its `pb_signin` cookie (decision 0161).
import { describe, expect, it } from 'vitest';
import { bindingsOf, holdsBinding, SIGNIN_BROWSER_BINDINGS, withBinding } from './signin.ts';
import { hashSecret } from './web.ts';

const binding = (n: number) => hashSecret('signin-browser', `code-${n}`);

describe('the bindings of the sign-in links a browser asked for', () => {
  it('keeps every link asked for, newest last, up to the bound', () => {
    let bindings: string[] = [];
    for (let n = 1; n <= SIGNIN_BROWSER_BINDINGS + 2; n++) bindings = withBinding(bindings, binding(n));
    expect(bindings).toHaveLength(SIGNIN_BROWSER_BINDINGS);
    expect(holdsBinding(bindings, binding(1))).toBe(false);
    expect(holdsBinding(bindings, binding(3))).toBe(true);
    expect(bindings.at(-1)).toBe(binding(SIGNIN_BROWSER_BINDINGS + 2));
  });

  it('round-trips through the cookie value; a repeated binding is kept once', () => {
    const bindings = withBinding(withBinding([binding(1)], binding(2)), binding(1));
    expect(bindings).toEqual([binding(2), binding(1)]);
    expect(bindingsOf(bindings.join('.'))).toEqual(bindings);
  });

  it('reads nothing but well-formed bindings, and at most the bound of them', () => {
    expect(bindingsOf(undefined)).toEqual([]);
    expect(bindingsOf('')).toEqual([]);
    expect(bindingsOf(`x.${binding(1)}.${binding(2).toUpperCase()}.${binding(2).slice(1)}`)).toEqual([binding(1)]);
    const many = Array.from({ length: 40 }, (_, n) => binding(n));
    expect(bindingsOf(many.join('.'))).toEqual(many.slice(-SIGNIN_BROWSER_BINDINGS));
  });

  it('a code this browser did not ask for matches none', () => {
    expect(holdsBinding([], binding(1))).toBe(false);
    expect(holdsBinding([binding(1), binding(2)], binding(3))).toBe(false);
  });
});
