// `phonebridge serve --help` names every serve flag docs/OPERATIONS.md documents (its flags table
// and its budgets table), from the one list src/config.ts parses; `device run --help` names the
// bridge flags of the CLI contract (--upstream-cmd, --upstream-url).
import { expect, it } from 'vitest';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { cli } from '../helpers/processes.ts';

const OPERATIONS = fileURLToPath(new URL('../../docs/OPERATIONS.md', import.meta.url));

/** The flags in the first column of the flags table and in the flag column of the budgets table. */
function documentedServeFlags(): string[] {
  const doc = readFileSync(OPERATIONS, 'utf8');
  const flagsTable = doc.slice(doc.indexOf('## `phonebridge serve` flags'), doc.indexOf('Exit codes:'));
  const budgets = doc.slice(
    doc.indexOf('## Budgets per key and per node'),
    doc.indexOf('With Redis the replay buffers'),
  );
  const flags = new Set<string>();
  for (const row of flagsTable.split('\n').filter((l) => l.startsWith('| `--')))
    for (const m of row.split('|')[1].matchAll(/`(--[a-z-]+)`/g)) flags.add(m[1]);
  for (const m of budgets.matchAll(/\| `(--[a-z-]+)` +\|/g)) flags.add(m[1]);
  return [...flags];
}

it('`phonebridge serve --help` names every serve flag docs/OPERATIONS.md documents', async () => {
  const documented = documentedServeFlags();
  expect(documented.length).toBeGreaterThan(30);
  const help = await cli(['serve', '--help']);
  const missing = documented.filter((f) => !new RegExp(`${f}(?![a-z-])`).test(help));
  expect(missing, `serve --help does not mention ${missing.length} documented flags`).toEqual([]);
}, 60_000);

it('`phonebridge device run --help` names the bridge flags of the CLI contract (--upstream-cmd, --upstream-url)', async () => {
  const help = await cli(['device', 'run', '--help']);
  const missing = ['--upstream-cmd', '--upstream-url'].filter((f) => !help.includes(f));
  expect(missing, 'device run --help does not mention').toEqual([]);
}, 60_000);
