// report.json (every figure and verdict), report.md (tables and the SVG charts) and the
// end-of-run summary on stdout.
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Verdict } from './thresholds.ts';
import type { Target } from './scenario.ts';

export interface Report {
  scenario: string;
  description: string;
  command: string;
  startedAt: string;
  finishedAt: string;
  durationS: number;
  passed: boolean;
  /** Set when the scenario itself failed (threw); the run fails too. */
  error?: string;
  environment: Record<string, unknown>;
  options: Record<string, unknown>;
  figures: Record<string, unknown>;
  metrics: Record<string, { type: string; values: Record<string, number> }>;
  targets: Target[];
  thresholds: Verdict[];
  charts: Array<{ file: string; title: string }>;
  notes: string[];
}

const num = (v: number | undefined, digits = 2) =>
  v === undefined ? '-' : Number.isNaN(v) ? 'n/a' : Number.isInteger(v) ? String(v) : v.toFixed(digits);

export function summaryText(r: Report): string {
  const lines = [`\n  scenario: ${r.scenario} (${r.durationS.toFixed(1)} s)`, ''];
  if (r.thresholds.length) {
    lines.push('  thresholds');
    for (const v of r.thresholds)
      lines.push(
        `    ${v.ok ? '✓' : '✗'} ${v.threshold}  ${v.error ? `(${v.error})` : `(actual ${num(v.actual, 3)})`}`,
      );
    lines.push('');
  }
  if (r.targets.length) {
    lines.push('  targets (reported)');
    for (const t of r.targets)
      lines.push(`    ${t.met ? '✓' : '✗'} ${t.name}: ${num(t.actual, 3)} ${t.unit} (goal ${t.goal})`);
    lines.push('');
  }
  lines.push('  metrics');
  const width = Math.max(10, ...Object.keys(r.metrics).map((k) => k.length)) + 3;
  for (const [name, m] of Object.entries(r.metrics).sort()) {
    const vals = Object.entries(m.values)
      .map(([k, v]) => `${k}=${num(v)}`)
      .join(' ');
    lines.push(`    ${name.padEnd(width, '.')}: ${vals}`);
  }
  for (const n of r.notes) lines.push(`  note: ${n}`);
  if (r.error) lines.push('', `  scenario error: ${r.error}`);
  lines.push('', `  ${r.passed ? 'PASSED' : 'FAILED'}`, '');
  return lines.join('\n');
}

function markdown(r: Report): string {
  const md = [
    `# Load test: ${r.scenario}`,
    '',
    r.description,
    '',
    `- command: \`${r.command}\``,
    `- started ${r.startedAt}, ${r.durationS.toFixed(1)} s`,
    `- result: **${r.passed ? 'passed' : 'FAILED'}**${r.error ? ` — scenario error: ${r.error}` : ''}`,
    `- environment: ${Object.entries(r.environment)
      .map(([k, v]) => `${k} ${typeof v === 'object' ? JSON.stringify(v) : String(v as string | number | boolean)}`)
      .join('; ')}`,
    '',
  ];
  if (r.thresholds.length) {
    md.push('## Thresholds', '', '| threshold | actual | verdict |', '| --- | --- | --- |');
    for (const v of r.thresholds)
      md.push(`| \`${v.threshold}\` | ${v.error ?? num(v.actual, 3)} | ${v.ok ? 'pass' : '**fail**'} |`);
    md.push('');
  }
  if (r.targets.length) {
    md.push('## Targets', '', '| measure | actual | goal | met |', '| --- | --- | --- | --- |');
    for (const t of r.targets)
      md.push(`| ${t.name} | ${num(t.actual, 3)} ${t.unit} | ${t.goal} | ${t.met ? 'yes' : '**no**'} |`);
    md.push('');
  }
  md.push('## Figures', '', '| figure | value |', '| --- | --- |');
  for (const [k, v] of Object.entries(r.figures))
    md.push(`| ${k} | ${typeof v === 'number' ? num(v, 3) : `\`${JSON.stringify(v)}\``} |`);
  md.push('', '## Metrics', '', '| metric | type | values |', '| --- | --- | --- |');
  for (const [name, m] of Object.entries(r.metrics).sort())
    md.push(
      `| ${name} | ${m.type} | ${Object.entries(m.values)
        .map(([k, v]) => `${k}=${num(v)}`)
        .join(', ')} |`,
    );
  md.push('');
  if (r.notes.length) md.push('## Notes', '', ...r.notes.map((n) => `- ${n}`), '');
  if (r.charts.length) {
    md.push('## Charts', '');
    for (const c of r.charts) md.push(`### ${c.title}`, '', `![${c.title}](${c.file})`, '');
  }
  return md.join('\n');
}

export function writeReport(dir: string, r: Report, charts: Map<string, string>): void {
  mkdirSync(dir, { recursive: true });
  for (const [file, svg] of charts) writeFileSync(join(dir, file), svg);
  writeFileSync(join(dir, 'report.json'), JSON.stringify(r, null, 2) + '\n');
  writeFileSync(join(dir, 'report.md'), markdown(r));
}
