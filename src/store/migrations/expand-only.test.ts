// Migrations only expand: a migration that lands leaves the schema usable by the release before
// it, which keeps serving while newer nodes migrate
// (docs/decisions/0202-migrations-during-a-rolling-upgrade.md). What the release before cannot
// live with is refused here by its SQL: dropping or renaming, changing a type, a new constraint
// on existing rows, a new NOT NULL column without a default (its inserts would fail).
import { readdirSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { MIGRATIONS } from './index.ts';

const DIR = fileURLToPath(new URL('.', import.meta.url));

/**
 * A contract step (removing what no supported release reads any more) is named here on purpose,
 * with the release after which it is safe: the decision's two-release rule.
 */
const CONTRACTS: Record<string, string> = {};

const BREAKING: Array<[RegExp, string]> = [
  [/\bdrop\s+(table|column|index|type|view|constraint)\b/i, 'drops something the release before may use'],
  [/\brename\b/i, 'renames something the release before uses'],
  [/\balter\s+column\s+\w+\s+(set\s+data\s+)?type\b/i, 'changes a column type'],
  [/\bset\s+not\s+null\b/i, 'makes an existing column NOT NULL'],
  [/\badd\s+(constraint|check|unique|foreign\s+key)\b/i, 'adds a constraint the release before may break'],
];

/** `alter table … add column … not null` without a default: the release before inserts without it. */
const NOT_NULL_WITHOUT_DEFAULT = /\badd\s+column\s+(?![^`,]*\bdefault\b)[^`,]*\bnot\s+null\b/i;

describe('every migration only expands the schema', () => {
  const files = readdirSync(DIR).filter((f) => /^\d{3}_.*\.ts$/.test(f) && !f.endsWith('.test.ts'));

  it('each numbered file is a registered migration with the release that introduced it', () => {
    expect(files.length).toBe(MIGRATIONS.length);
    for (const m of MIGRATIONS) expect(m.release).toMatch(/^\d+\.\d+\.\d+$/);
  });

  it.each(files)('%s', (file) => {
    if (CONTRACTS[file]) return; // a deliberate contract step, see CONTRACTS
    const src = readFileSync(`${DIR}/${file}`, 'utf8')
      .replace(/^\s*\/\/.*$/gm, '') // comments may say anything
      .replace(/--[^\n]*/g, '');
    for (const [re, why] of BREAKING) expect(re.test(src) ? `${file}: ${why}` : '').toBe('');
    expect(NOT_NULL_WITHOUT_DEFAULT.test(src) ? `${file}: a NOT NULL column without a default` : '').toBe('');
  });

  it('the checks catch what they are for', () => {
    const bad = [
      'sql`alter table devices drop column name`',
      'sql`alter table tokens rename to keys`',
      'sql`alter table devices alter column name type integer`',
      'sql`alter table devices alter column name set not null`',
      "sql`alter table devices add constraint x check (name <> '')`",
    ];
    for (const b of bad)
      expect(
        BREAKING.some(([re]) => re.test(b)),
        b,
      ).toBe(true);
    expect(NOT_NULL_WITHOUT_DEFAULT.test('sql`alter table devices add column x text not null`')).toBe(true);
    expect(
      NOT_NULL_WITHOUT_DEFAULT.test("sql`alter table devices add column labels jsonb not null default '{}'::jsonb`"),
    ).toBe(false);
  });
});
