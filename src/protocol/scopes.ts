// Each tool declares its scope in _meta["phonebridge/scope"]; a credential sees and calls only
// tools of its scopes, and a tool with no (valid) scope is invisible to all
// (docs/decisions/0005-tool-scope-in-meta.md).
import { SCOPES, type Scope } from '../store/types.ts';
import { TASKS_EXTENSION } from './stateless.ts';
import { METHOD_NOT_FOUND, relayError, type JsonRpcErrorObject } from './errors.ts';

export const SCOPE_META_KEY = 'phonebridge/scope';

export interface ToolLike {
  name: string;
  _meta?: Record<string, unknown>;
  [k: string]: unknown;
}

export function toolScope(tool: ToolLike): Scope | undefined {
  const s = tool._meta?.[SCOPE_META_KEY];
  return typeof s === 'string' && (SCOPES as readonly string[]).includes(s) ? (s as Scope) : undefined;
}

export class ToolCatalog {
  readonly byName = new Map<string, ToolLike>();
  constructor(readonly tools: ToolLike[]) {
    for (const t of tools) this.byName.set(t.name, t);
  }

  visibleTo(scopes: readonly Scope[]): ToolLike[] {
    return this.tools.filter((t) => {
      const s = toolScope(t);
      return s !== undefined && scopes.includes(s);
    });
  }

  /** Whether a tools/call may go to the phone. */
  check(
    name: unknown,
    scopes: readonly Scope[],
  ): { ok: true } | { ok: false; reason: 'unknown_tool' } | { ok: false; reason: 'insufficient_scope'; scope: Scope } {
    const tool = typeof name === 'string' ? this.byName.get(name) : undefined;
    const scope = tool && toolScope(tool);
    if (!scope) return { ok: false, reason: 'unknown_tool' };
    return scopes.includes(scope) ? { ok: true } : { ok: false, reason: 'insufficient_scope', scope };
  }
}

/** The WWW-Authenticate value for a request outside the credential's scopes (MCP authorization spec). */
export function insufficientScopeChallenge(scope: Scope): string {
  return `Bearer error="insufficient_scope", scope="${scope}", error_description="this key lacks the scope ${scope}"`;
}

/**
 * What every method a client may send to the phone needs (docs/decisions/0030-method-scopes.md):
 * the capability the phone advertised in its initialize result, and the scope of the caller.
 * `any` is every credential (tools/list is filtered per tool; tools/call is checked per tool).
 * A method missing here is never forwarded.
 */
interface MethodRule {
  /**
   * The capability in the phone's initialize result: a dotted path (`resources`,
   * `resources.subscribe`), or a list of paths of which one suffices; in a list, a path whose key
   * has a dot is written as its keys (`['extensions', 'io.modelcontextprotocol/tasks']`).
   */
  capability?: string | readonly CapabilityPath[];
  scope: Scope | 'any' | 'per-tool';
}
type CapabilityPath = string | readonly string[];

/** The 2026-07-28 tasks extension (SEP-2663) as the phone advertises it. */
const TASKS_EXTENSION_PATH = ['extensions', TASKS_EXTENSION] as const;

export const METHOD_RULES: Readonly<Record<string, MethodRule>> = {
  ping: { scope: 'any' },
  'tools/list': { capability: 'tools', scope: 'any' },
  'tools/call': { capability: 'tools', scope: 'per-tool' },
  'resources/list': { capability: 'resources', scope: 'devices:read' },
  'resources/templates/list': { capability: 'resources', scope: 'devices:read' },
  'resources/read': { capability: 'resources', scope: 'devices:read' },
  'resources/subscribe': { capability: 'resources.subscribe', scope: 'devices:read' },
  'resources/unsubscribe': { capability: 'resources.subscribe', scope: 'devices:read' },
  'prompts/list': { capability: 'prompts', scope: 'devices:read' },
  'prompts/get': { capability: 'prompts', scope: 'devices:read' },
  'completion/complete': { capability: 'completions', scope: 'devices:read' },
  // One level for every client of the phone: changing it acts on the phone.
  'logging/setLevel': { capability: 'logging', scope: 'devices:act' },
  // A task belongs to the credential that created it, and the phone answers only that one
  // (docs/decisions/0182-tasks.md); creating it took the tool's own scope. tasks/get and
  // tasks/cancel exist in both task revisions (2025-11-25 `tasks`, the 2026-07-28 extension),
  // tasks/update only in the extension, tasks/result and tasks/list only in 2025-11-25
  // (docs/decisions/0183-tasks-extension.md); the stateless path admits only the extension's.
  'tasks/get': { capability: ['tasks', TASKS_EXTENSION_PATH], scope: 'any' },
  'tasks/result': { capability: 'tasks', scope: 'any' },
  'tasks/list': { capability: 'tasks.list', scope: 'any' },
  'tasks/cancel': { capability: ['tasks.cancel', TASKS_EXTENSION_PATH], scope: 'any' },
  'tasks/update': { capability: [TASKS_EXTENSION_PATH], scope: 'any' },
};

export type MethodVerdict =
  | { ok: true; perTool: boolean }
  | { ok: false; reason: 'method_not_found'; message: string }
  | { ok: false; reason: 'insufficient_scope'; scope: Scope };

/** A capability as the lists of keys it may be found under, one of which suffices. */
function pathsOf(capability: string | readonly CapabilityPath[]): readonly (readonly string[])[] {
  const paths = typeof capability === 'string' ? [capability] : capability;
  return paths.map((p) => (typeof p === 'string' ? p.split('.') : p));
}

/**
 * Each method's rule with its capability's paths split once: checkMethod runs on every request,
 * where splitting them made an array per path and a closure each time.
 */
interface CheckedRule {
  paths: readonly (readonly string[])[] | undefined;
  rule: MethodRule;
}
const CHECKED_RULES = new Map<string, CheckedRule>(
  Object.entries(METHOD_RULES).map(([method, rule]) => [
    method,
    { paths: rule.capability === undefined ? undefined : pathsOf(rule.capability), rule },
  ]),
);

/** Whether the phone's capabilities hold one of `paths`. */
function advertised(capabilities: unknown, paths: readonly (readonly string[])[]): boolean {
  for (const path of paths) if (hasPath(capabilities, path)) return true;
  return false;
}

function hasPath(capabilities: unknown, path: readonly string[]): boolean {
  let node: unknown = capabilities;
  for (const part of path) {
    if (!node || typeof node !== 'object' || Array.isArray(node)) return false;
    node = (node as Record<string, unknown>)[part];
  }
  // `{}` advertises a capability; `subscribe: true` a sub-feature; false/absent does not.
  return node !== undefined && node !== null && node !== false;
}

function describe(paths: readonly (readonly string[])[]): string {
  return paths.map((p) => p.join('.')).join(' or ');
}

/** Whether a client request may go to (or be answered for) the phone; tools/call then checks the tool. */
export function checkMethod(method: string, capabilities: unknown, scopes: readonly Scope[]): MethodVerdict {
  const checked = CHECKED_RULES.get(method);
  if (!checked) return { ok: false, reason: 'method_not_found', message: `Method not found: ${method}` };
  const rule = checked.rule;
  if (checked.paths && !advertised(capabilities, checked.paths))
    return {
      ok: false,
      reason: 'method_not_found',
      message: `Method not found: the phone does not offer ${describe(checked.paths)} (${method})`,
    };
  if (rule.scope !== 'any' && rule.scope !== 'per-tool' && !scopes.includes(rule.scope))
    return { ok: false, reason: 'insufficient_scope', scope: rule.scope };
  return rule.scope === 'per-tool' ? ADMITTED_PER_TOOL : ADMITTED;
}

// The verdicts that admit, made once (a verdict is read, never changed).
const ADMITTED: MethodVerdict = Object.freeze({ ok: true, perTool: false });
const ADMITTED_PER_TOOL: MethodVerdict = Object.freeze({ ok: true, perTool: true });

/** The error of a request outside the credential's scopes (-31008, with the scope it needs). */
export function insufficientScopeError(scope: Scope): JsonRpcErrorObject {
  return { ...relayError('insufficient_scope', scope), data: { code: 'insufficient_scope', scope } };
}

/** The error a request checkMethod refused gets. */
export function methodRefusal(v: Exclude<MethodVerdict, { ok: true }>): JsonRpcErrorObject {
  return v.reason === 'method_not_found'
    ? { code: METHOD_NOT_FOUND, message: v.message }
    : insufficientScopeError(v.scope);
}

/**
 * checkMethod for a phone that is not connected, against its last initialize result (the
 * store's copy): the refusal its socket would give, or undefined when only the phone could
 * answer (device_offline then). A phone that never connected (`initResult` null or undefined)
 * has no known capabilities: only methods no phone is ever asked are refused
 * (docs/decisions/0217-offline-refusals-from-cached-capabilities.md).
 */
export function offlineRefusal(
  method: string,
  initResult: unknown,
  scopes: readonly Scope[],
): JsonRpcErrorObject | undefined {
  const known = initResult !== null && typeof initResult === 'object';
  if (!known && Object.hasOwn(METHOD_RULES, method)) return undefined;
  const v = checkMethod(method, known ? (initResult as { capabilities?: unknown }).capabilities : undefined, scopes);
  return v.ok ? undefined : methodRefusal(v);
}
