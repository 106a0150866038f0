// No import cycles among the modules of src/ and services/: a cycle makes evaluation order
// decide whether a binding is ready (an ESM cycle can hand one module another's uninitialised
// exports), and it blurs which module answers which question. Static and dynamic relative
// imports of .ts files count; `import type` lines are erased at run time and do not.
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const ROOTS = ['src', 'services'];

// `import … from '…'`, `export … from '…'` (not `import type` / `export type`), `import('…')`.
const STATIC = /^\s*(?:import|export)\s+(?!type\s)[^;]*?\bfrom\s+'(\.[^']+)'/gm;
const SIDE_EFFECT = /^\s*import\s+'(\.[^']+)'/gm;
const DYNAMIC = /\bimport\(\s*'(\.[^']+)'\s*\)/g;

function tsFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const path = join(dir, e.name);
    if (e.isDirectory()) return e.name === 'node_modules' ? [] : tsFiles(path);
    return e.name.endsWith('.ts') ? [path] : [];
  });
}

/** Relative .ts imports of one source text, resolved against its file. */
function importsOf(file: string, text: string): string[] {
  const found: string[] = [];
  for (const re of [STATIC, SIDE_EFFECT, DYNAMIC])
    for (const m of text.matchAll(re)) if (m[1].endsWith('.ts')) found.push(resolve(dirname(file), m[1]));
  return found;
}

/** One cycle (as a list of files, the first repeated at the end), or undefined. */
function findCycle(graph: Map<string, string[]>): string[] | undefined {
  const state = new Map<string, 'open' | 'done'>();
  const stack: string[] = [];
  const visit = (node: string): string[] | undefined => {
    state.set(node, 'open');
    stack.push(node);
    for (const next of graph.get(node) ?? []) {
      if (!graph.has(next)) continue; // outside the checked roots
      if (state.get(next) === 'open') return [...stack.slice(stack.indexOf(next)), next];
      if (!state.has(next)) {
        const cycle = visit(next);
        if (cycle) return cycle;
      }
    }
    stack.pop();
    state.set(node, 'done');
    return undefined;
  };
  for (const node of graph.keys()) {
    if (state.has(node)) continue;
    const cycle = visit(node);
    if (cycle) return cycle;
  }
  return undefined;
}

describe('import graph of src/ and services/', () => {
  it('finds a cycle when there is one (the check itself works)', () => {
    const files = ['/r/a.ts', '/r/b.ts', '/r/c.ts'];
    const texts = [
      "import { b } from './b.ts';",
      "import type { A } from './a.ts';\nexport { c } from './c.ts';",
      "const { a } = await import('./a.ts');",
    ];
    const graph = new Map(files.map((f, i) => [f, importsOf(f, texts[i])]));
    expect(findCycle(graph)).toEqual(['/r/a.ts', '/r/b.ts', '/r/c.ts', '/r/a.ts']);
    graph.set('/r/c.ts', []);
    expect(findCycle(graph)).toBeUndefined();
  });

  it('has no cycle', () => {
    const graph = new Map<string, string[]>();
    for (const root of ROOTS)
      for (const file of tsFiles(join(ROOT, root))) graph.set(file, importsOf(file, readFileSync(file, 'utf8')));
    expect(graph.size).toBeGreaterThan(50);
    const cycle = findCycle(graph);
    expect(cycle?.map((f) => relative(ROOT, f)).join(' → ')).toBeUndefined();
  });
});
