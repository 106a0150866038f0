// Plan caps of hosted accounts. Billing is outside the relay: an operator (or a billing
// integration driving the CLI) sets caps with `accounts plan` and locks with `accounts lock`.

/** What a new account gets on first sign-in. */
export const DEFAULT_PLAN = { maxDevices: 3, maxKeys: 10 } as const;

/** Canonical form of a sign-in address; undefined when it is not plausibly one. */
export function normalizeEmail(input: unknown): string | undefined {
  if (typeof input !== 'string') return undefined;
  const e = input.trim().toLowerCase();
  // eslint-disable-next-line no-control-regex -- control characters are what is refused
  if (e.length > 254 || /[\u0000-\u001f\u007f]/.test(e) || !/^[^\s@<>"]+@[^\s@<>"]+\.[^\s@<>"]+$/.test(e))
    return undefined;
  return e;
}
