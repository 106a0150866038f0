// The client's own name for itself, from the `clientInfo` of its `initialize`, as a session keeps
// it: only name and version, printable, short. Anything else (or nothing) gives undefined.
const MAX_NAME = 100;
const MAX_VERSION = 40;

function printable(v: unknown, max: number): string | undefined {
  if (typeof v !== 'string') return undefined;
  // eslint-disable-next-line no-control-regex -- removing control characters is the point
  const s = v.replace(/[\u0000-\u001f\u007f-\u009f]/g, '').trim();
  return s ? s.slice(0, max) : undefined;
}

export function clientInfoOf(params: unknown): { name: string; version?: string } | undefined {
  if (typeof params !== 'object' || params === null) return undefined;
  const info = (params as { clientInfo?: unknown }).clientInfo;
  if (typeof info !== 'object' || info === null) return undefined;
  const name = printable((info as { name?: unknown }).name, MAX_NAME);
  if (!name) return undefined;
  const version = printable((info as { version?: unknown }).version, MAX_VERSION);
  return version ? { name, version } : { name };
}
