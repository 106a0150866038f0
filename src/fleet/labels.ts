// Labels and selectors (docs/decisions/0172-labels-and-selectors.md): Kubernetes label syntax,
// parsed and checked here, pure. The phone's own facts are read-only labels under FACT_PREFIX.

/** Labels a phone reports about itself (from its initialize result); never set by hand. */
export const FACT_PREFIX = 'phonebridge.dev/';

export type Labels = Record<string, string>;

const NAME = /^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$/;
const DNS_SUBDOMAIN = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;
/** At most this many hand-set labels per phone. */
export const MAX_LABELS = 64;

export class LabelError extends Error {}

/** Why `key` is not a valid label key (Kubernetes: optional DNS-subdomain prefix + "/" + name ≤ 63), or undefined. */
export function labelKeyProblem(key: string): string | undefined {
  const slash = key.lastIndexOf('/');
  const prefix = slash >= 0 ? key.slice(0, slash) : undefined;
  const name = slash >= 0 ? key.slice(slash + 1) : key;
  if (prefix !== undefined && (prefix.length === 0 || prefix.length > 253 || !DNS_SUBDOMAIN.test(prefix)))
    return `label key "${key}": the prefix must be a DNS subdomain (lower case, at most 253 characters)`;
  if (name.length === 0 || name.length > 63 || !NAME.test(name))
    return `label key "${key}": the name must be 1–63 characters of [A-Za-z0-9-_.], starting and ending alphanumeric`;
  return undefined;
}

/** Why `value` is not a valid label value (empty, or ≤ 63 of [A-Za-z0-9-_.] starting and ending alphanumeric). */
export function labelValueProblem(key: string, value: string): string | undefined {
  if (value === '') return undefined;
  if (value.length > 63 || !NAME.test(value))
    return `label "${key}": the value must be at most 63 characters of [A-Za-z0-9-_.], starting and ending alphanumeric`;
  return undefined;
}

export function isFactKey(key: string): boolean {
  return key.startsWith(FACT_PREFIX);
}

/** Checks labels someone sets (not facts): throws LabelError naming the first bad one. */
export function validateLabels(labels: Labels): Labels {
  for (const [k, v] of Object.entries(labels)) {
    const p = labelKeyProblem(k) ?? labelValueProblem(k, v);
    if (p) throw new LabelError(p);
    if (isFactKey(k))
      throw new LabelError(`label key "${k}": the prefix ${FACT_PREFIX} is reserved for the phone's own facts`);
  }
  if (Object.keys(labels).length > MAX_LABELS) throw new LabelError(`at most ${MAX_LABELS} labels per phone`);
  return labels;
}

export interface LabelChange {
  set: Labels;
  remove: string[];
}

/** `k=v` sets, `k-` removes (`phonebridge devices label ID site=berlin model-`). */
export function parseLabelArgs(args: readonly string[]): LabelChange {
  const change: LabelChange = { set: {}, remove: [] };
  if (args.length === 0) throw new LabelError('expected at least one k=v or k-');
  for (const a of args) {
    const eq = a.indexOf('=');
    if (eq >= 0) {
      const k = a.slice(0, eq);
      const v = a.slice(eq + 1);
      // The key is checked before it is stored: "__proto__" would otherwise vanish on assignment.
      const p = labelKeyProblem(k);
      if (p) throw new LabelError(p);
      if (Object.hasOwn(change.set, k) || change.remove.includes(k)) throw new LabelError(`label "${k}" given twice`);
      change.set[k] = v;
    } else if (a.endsWith('-') && a.length > 1) {
      const k = a.slice(0, -1);
      const p = labelKeyProblem(k);
      if (p) throw new LabelError(p);
      if (isFactKey(k)) throw new LabelError(`label key "${k}": the prefix ${FACT_PREFIX} is reserved`);
      if (Object.hasOwn(change.set, k) || change.remove.includes(k)) throw new LabelError(`label "${k}" given twice`);
      change.remove.push(k);
    } else {
      throw new LabelError(`"${a}": expected k=v to set a label or k- to remove one`);
    }
  }
  validateLabels(change.set);
  return change;
}

/** `k=v,k2=v2` (the CLI's --labels), validated; a key given twice is refused, as parseLabelArgs refuses it. */
export function parseLabelList(raw: string | undefined): Labels {
  if (!raw?.trim()) return {};
  const entries: Array<[string, string]> = [];
  for (const part of raw.split(',')) {
    const eq = part.indexOf('=');
    if (eq < 0) throw new LabelError(`"${part}": expected k=v`);
    const k = part.slice(0, eq).trim();
    if (entries.some(([seen]) => seen === k)) throw new LabelError(`label "${k}" given twice`);
    entries.push([k, part.slice(eq + 1).trim()]);
  }
  // fromEntries makes every key an own property ("__proto__" included), so validateLabels sees it.
  return validateLabels(Object.fromEntries(entries));
}

// --- Selectors -------------------------------------------------------------------------------

/** One requirement of a selector: Kubernetes equality- and set-based forms. */
export type Requirement =
  | { key: string; op: 'eq' | 'neq'; value: string }
  | { key: string; op: 'in' | 'notin'; values: string[] }
  | { key: string; op: 'exists' | 'absent' };

export type Selector = Requirement[];

/**
 * Parses `k=v`, `k==v`, `k!=v`, `k in (a,b)`, `k notin (a,b)`, `k`, `!k`, comma-separated
 * (all must hold). The empty selector matches every phone. Throws LabelError.
 */
export function parseSelector(raw: string | undefined): Selector {
  const text = (raw ?? '').trim();
  if (text === '') return [];
  const parts: string[] = [];
  // Split on commas outside parentheses.
  let depth = 0;
  let cur = '';
  for (const ch of text) {
    if (ch === '(') depth++;
    if (ch === ')') depth--;
    if (depth < 0) throw new LabelError(`selector "${text}": unbalanced ")"`);
    if (ch === ',' && depth === 0) {
      parts.push(cur);
      cur = '';
    } else cur += ch;
  }
  if (depth !== 0) throw new LabelError(`selector "${text}": unbalanced "("`);
  parts.push(cur);
  return parts.map((p) => parseRequirement(p.trim(), text));
}

function parseRequirement(p: string, whole: string): Requirement {
  if (p === '') throw new LabelError(`selector "${whole}": empty requirement`);
  const set = /^(\S+)\s+(in|notin)\s*\(([^)]*)\)$/.exec(p);
  if (set) {
    const values = set[3]
      .split(',')
      .map((v) => v.trim())
      .filter((v) => v !== '');
    if (values.length === 0) throw new LabelError(`selector "${whole}": "${p}" needs at least one value`);
    checkKey(set[1]);
    for (const v of values) checkValue(set[1], v);
    return { key: set[1], op: set[2] as 'in' | 'notin', values };
  }
  const m = /^([^=!\s]+)\s*(!=|==|=)\s*([^=!\s]*)$/.exec(p);
  if (m) {
    checkKey(m[1]);
    checkValue(m[1], m[3]);
    return { key: m[1], op: m[2] === '!=' ? 'neq' : 'eq', value: m[3] };
  }
  const ex = /^(!?)([^=!\s()]+)$/.exec(p);
  if (ex) {
    checkKey(ex[2]);
    return { key: ex[2], op: ex[1] ? 'absent' : 'exists' };
  }
  throw new LabelError(
    `selector "${whole}": cannot read "${p}" (expected k=v, k!=v, k in (a,b), k notin (a,b), k or !k)`,
  );
}

function checkKey(k: string): void {
  const p = labelKeyProblem(k);
  if (p) throw new LabelError(p);
}

function checkValue(k: string, v: string): void {
  const p = labelValueProblem(k, v);
  if (p) throw new LabelError(p);
}

/** The canonical text of a selector (stored with a fleet key, shown back). */
export function formatSelector(sel: Selector): string {
  return sel
    .map((r) => {
      switch (r.op) {
        case 'eq':
          return `${r.key}=${r.value}`;
        case 'neq':
          return `${r.key}!=${r.value}`;
        case 'in':
          return `${r.key} in (${r.values.join(',')})`;
        case 'notin':
          return `${r.key} notin (${r.values.join(',')})`;
        case 'exists':
          return r.key;
        case 'absent':
          return `!${r.key}`;
      }
    })
    .join(',');
}

/** A selector given as an object (`{"site":"berlin"}`, the HTTP API's form): equality on each key. */
export function selectorFromObject(obj: Record<string, string>): Selector {
  return Object.entries(obj).map(([key, value]) => {
    checkKey(key);
    checkValue(key, value);
    return { key, op: 'eq' as const, value };
  });
}

/** Whether `labels` (hand-set labels and facts together) satisfy every requirement. */
export function matches(sel: Selector, labels: Labels): boolean {
  for (const r of sel) {
    const v = Object.prototype.hasOwnProperty.call(labels, r.key) ? labels[r.key] : undefined;
    switch (r.op) {
      case 'eq':
        if (v !== r.value) return false;
        break;
      case 'neq':
        if (v === r.value) return false;
        break;
      case 'in':
        if (v === undefined || !r.values.includes(v)) return false;
        break;
      case 'notin':
        if (v !== undefined && r.values.includes(v)) return false;
        break;
      case 'exists':
        if (v === undefined) return false;
        break;
      case 'absent':
        if (v !== undefined) return false;
        break;
    }
  }
  return true;
}

/**
 * The phone's facts as labels, from its last initialize result: the MCP server's name and
 * version (the app), the revision it speaks, and — when the app reports them under
 * `_meta["phonebridge/device"]` — model and Android version. Values are cut to label syntax.
 */
export function factLabels(initResult: unknown): Labels {
  const out: Labels = {};
  if (!initResult || typeof initResult !== 'object') return out;
  const r = initResult as {
    serverInfo?: { name?: unknown; version?: unknown };
    protocolVersion?: unknown;
    _meta?: Record<string, unknown>;
  };
  const put = (k: string, v: unknown) => {
    if (typeof v !== 'string' && typeof v !== 'number') return;
    const s = toLabelValue(String(v));
    if (s) out[FACT_PREFIX + k] = s;
  };
  put('app', r.serverInfo?.name);
  put('app-version', r.serverInfo?.version);
  put('protocol', r.protocolVersion);
  const dev = r._meta?.['phonebridge/device'] as { model?: unknown; android?: unknown } | undefined;
  if (dev && typeof dev === 'object') {
    put('model', dev.model);
    put('android', dev.android);
  }
  return out;
}

/** A string made into a valid label value: other characters become "-", trimmed to 63. */
export function toLabelValue(s: string): string {
  const cleaned = s
    .replace(/[^A-Za-z0-9-_.]/g, '-')
    .slice(0, 63)
    .replace(/^[^A-Za-z0-9]+|[^A-Za-z0-9]+$/g, '');
  return cleaned;
}
