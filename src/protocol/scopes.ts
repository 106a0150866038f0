// Each tool declares its scope in _meta["phonebridge/scope"]; a credential sees and calls only
// tools of its scopes, and a tool with no (valid) scope is invisible to all
// (docs/decisions/0005-tool-scope-in-meta.md).
import { SCOPES, type Scope } from '../store/types.ts';

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

/** The WWW-Authenticate value for a call outside the credential's scopes (MCP authorization spec). */
export function insufficientScopeChallenge(scope: Scope): string {
  return `Bearer error="insufficient_scope", scope="${scope}", error_description="this key lacks the scope ${scope}"`;
}
