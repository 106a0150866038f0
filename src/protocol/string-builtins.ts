// String methods for the per-call path, called as `charCodeAt.call(s, i)`: the compiler reduces
// that to the builtin for any kind of string, where `s.charCodeAt(i)` on strings of many kinds
// (flat, concatenated, sliced, from uWS or a parser) became a megamorphic load per call
// (docs/decisions/0239-string-methods-on-hot-paths-through-call.md).
/* eslint-disable @typescript-eslint/unbound-method -- only ever called with .call(s, …) */
export const charCodeAt = String.prototype.charCodeAt;
export const startsWith = String.prototype.startsWith;
/* eslint-enable @typescript-eslint/unbound-method */
