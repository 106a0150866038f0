// Renders docs/TOOLS.md from what the server actually registers (via tools/list), so the
// reference cannot describe a tool that does not exist or miss one that does.
import { xMcpHeaders } from '../../protocol/tool-headers.ts';
import { SimPhone } from '../sim/model.ts';
import { ERROR_CODES, SCOPE_META_KEY, SURFACE_CHANGES, SURFACE_VERSION } from './contract.ts';
import { connect } from './in-memory.ts';
import { IMMEDIATE_RESULT_MS } from './task-server.ts';

export const TOOLS_DOC_PATH = 'docs/TOOLS.md';
export const TOOLS_DOC_COMMAND = 'npx tsx scripts/gen-tools-doc.ts';
/** The Inspector's portability report on the served catalog (--strict: in full, exit 6 on an error). */
export const INSPECTOR_COMMAND =
  'npx -y -p node@22 -p @modelcontextprotocol/inspector@2.12.0 mcp-inspector --cli --transport http --server-url <MCP URL> --header "X-Api-Key: <key>" --method tools/list --strict';

export async function renderToolsDoc(): Promise<string> {
  const client = await connect({ phone: new SimPhone(), deviceId: 'doc' });
  const { tools } = await client.listTools();
  const version = client.getServerVersion()?.version;
  await client.close();

  const yes = (v: unknown) => (v ? 'yes' : 'no');
  const lines = [
    '# Phone tool surface',
    '',
    `<!-- Generated from the registered tools by \`${TOOLS_DOC_COMMAND}\`; do not edit by hand. -->`,
    '',
    `Surface version (server info \`version\`): \`${version ?? SURFACE_VERSION}\`. Every tool description ends with \`@since <version>\`.`,
    `Each tool's scope is in \`_meta["${SCOPE_META_KEY}"]\`; \`requiresUserInteraction\` is in \`_meta\` too.`,
    'A success carries `structuredContent` (valid against `outputSchema`) and the same JSON in a text block;',
    'an error is `isError: true` with `{"error":{"code","message",…}}` in the text block and no `structuredContent`.',
    '',
    'Task support is `execution.taskSupport`, in both task revisions (docs/PROTOCOL.md "Tasks"): `optional` — a',
    '2025-11-25 client may call it as a task (`params.task`), and a 2026-07-28 client that declares the tasks',
    'extension (`io.modelcontextprotocol/tasks`) may be answered with a task (the phone decides: a call that ends within',
    `${IMMEDIATE_RESULT_MS} ms gets its plain result); \`forbidden\` — always a plain result.`,
    'Headers are the tool headers a 2026-07-28 client mirrors (`x-mcp-header` → `Mcp-Param-<Name>`: argument). A header',
    "carries only an integer, string or boolean: `wait_for_events`' published `timeout_s` is a number (fractions of a",
    'second) and has none (docs/decisions/0184-timeout-s-stays-a-number.md); its `timeout_ms` sets the same wait in whole',
    'milliseconds and is declared as `Mcp-Param-Timeout-Ms`, from which the relay sizes its own timeout',
    '(docs/decisions/0212-timeout-ms-tool-header.md).',
    '',

    'Schema portability: every `inputSchema` and `outputSchema` is in the subset of docs/decisions/0180-portable-tool-schemas.md.',
    `The MCP Inspector's report on this catalog through the relay is empty: \`${INSPECTOR_COMMAND}\``,
    '(Inspector 2.12.0, Node 22) prints no finding and exits 0; test/phone/inspector-portability.test.ts runs it.',
    '',
    '| Tool | Scope | readOnly | destructive | idempotent | openWorld | requiresUserInteraction | Task support | Headers |',
    '| - | - | - | - | - | - | - | - | - |',
    ...tools.map(
      (t) =>
        `| \`${t.name}\` | \`${String(t._meta?.[SCOPE_META_KEY])}\` | ${yes(t.annotations?.readOnlyHint)} | ${yes(t.annotations?.destructiveHint)} | ${yes(t.annotations?.idempotentHint)} | ${yes(t.annotations?.openWorldHint)} | ${yes(t._meta?.requiresUserInteraction)} | ${t.execution?.taskSupport ?? 'forbidden'} | ${headers(t.inputSchema)} |`,
    ),
    '',
    '## Error codes',
    '',
    '| Code | Meaning |',
    '| - | - |',
    ...Object.entries(ERROR_CODES).map(([code, meaning]) => `| \`${code}\` | ${meaning} |`),
    '',
    '## Changes',
    '',
    'The surface only grows (additive changes); each release that added to it, newest first:',
    '',
    '| Version | Added |',
    '| - | - |',
    ...SURFACE_CHANGES.map((c) => `| \`${c.version}\` | ${c.change} |`),
    '',
  ];
  for (const t of tools) {
    lines.push(
      `## \`${t.name}\`${t.title ? ` — ${t.title}` : ''}`,
      '',
      (t.description ?? '').trim(),
      '',
      `Scope \`${String(t._meta?.[SCOPE_META_KEY])}\`. Annotations: \`${JSON.stringify(t.annotations)}\`. Meta: \`${JSON.stringify(t._meta)}\`.`,
      '',
      '<details><summary>Input schema</summary>',
      '',
      '```json',
      JSON.stringify(t.inputSchema, null, 2),
      '```',
      '',
      '</details>',
      '',
      '<details><summary>Output schema</summary>',
      '',
      '```json',
      JSON.stringify(t.outputSchema, null, 2),
      '```',
      '',
      '</details>',
      '',
    );
  }
  return lines.join('\n');
}

/** `Mcp-Param-Timeout`: `timeout_s`, for each x-mcp-header the tool declares; `-` for none. */
function headers(inputSchema: unknown): string {
  const decl = xMcpHeaders(inputSchema);
  if (!decl.ok) return `invalid: ${decl.reason}`;
  return decl.params.map((p) => `\`Mcp-Param-${p.header}\`: \`${p.path.join('.')}\``).join(', ') || '-';
}
