// The scope each bridged tool declares in `_meta["phonebridge/scope"]`
// (docs/decisions/0004-device-bound-tokens-and-scopes.md, 0005-tool-scope-in-meta.md):
// the relay shows and allows a tool only to credentials that hold it, and hides a tool without one.
import { readFileSync } from 'node:fs';
import type { Tool } from '@modelcontextprotocol/sdk/types.js';
import { z } from 'zod';
import { SCOPE_META_KEY, SCOPES, type Scope } from '../tools/contract.ts';

/** `--scope-map FILE`: `{"toolName": "devices:read" | "devices:act" | "devices:lease" | "runs:start"}`. */
export type ScopeMap = Readonly<Record<string, Scope>>;

const ScopeMapSchema = z.record(z.string(), z.enum(SCOPES));

/** Reads and checks the file at start-up, so a typo stops the bridge instead of mis-scoping tools. */
export function loadScopeMap(path: string): ScopeMap {
  let raw: unknown;
  try {
    raw = JSON.parse(readFileSync(path, 'utf8'));
  } catch (err) {
    throw new Error(`--scope-map ${path}: ${(err as Error).message}`, { cause: err });
  }
  const parsed = ScopeMapSchema.safeParse(raw);
  if (!parsed.success) {
    throw new Error(
      `--scope-map ${path} must map tool names to one of ${SCOPES.join(', ')}:\n${z.prettifyError(parsed.error)}`,
    );
  }
  return parsed.data;
}

/** The map wins; otherwise a tool that promises to change nothing is a read and every other one acts. */
export function scopeFor(tool: Tool, map: ScopeMap): Scope {
  if (Object.hasOwn(map, tool.name)) return map[tool.name];
  return tool.annotations?.readOnlyHint === true ? 'devices:read' : 'devices:act';
}

export function withScope(tool: Tool, map: ScopeMap): Tool {
  return { ...tool, _meta: { ...tool._meta, [SCOPE_META_KEY]: scopeFor(tool, map) } };
}
