// The layers, as imports: the gateway (src/gateway) knows no optional feature by name — hosted
// mode and fleets plug in through src/gateway/features.ts (docs/decisions/0174-gateway-features.md)
// and only the composition root (services/serve.ts) names them; and src/ never imports
// services/. Every relative import counts here, `import type` included: a type from a feature
// is knowing it by name too.
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');

// `import … from '…'` (type or not), `export … from '…'`, side-effect imports, `import('…')`.
const FROM = /^\s*(?:import|export)\s[^;]*?\bfrom\s+'(\.[^']+)'/gm;
const BARE = /^\s*import\s+'(\.[^']+)'/gm;
const DYNAMIC = /\bimport\(\s*'(\.[^']+)'\s*\)/g;

function tsFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const path = join(dir, e.name);
    if (e.isDirectory()) return tsFiles(path);
    return e.name.endsWith('.ts') ? [path] : [];
  });
}

/** Relative imports of a source text, as paths relative to the repository root. */
function importsOf(file: string, text: string): string[] {
  const out: string[] = [];
  for (const re of [FROM, BARE, DYNAMIC])
    for (const m of text.matchAll(re))
      out.push(
        relative(ROOT, resolve(dirname(file), m[1]))
          .split(sep)
          .join('/'),
      );
  return out;
}

interface Rule {
  /** Files under this folder… */
  from: string;
  /** …import nothing under these. */
  never: string[];
}

const RULES: Rule[] = [
  { from: 'src/gateway', never: ['src/hosted', 'src/fleet'] },
  { from: 'src', never: ['services'] },
];

/** "file → import" for every import breaking a rule. */
function violations(files: Array<{ file: string; text: string }>): string[] {
  const out: string[] = [];
  for (const { file, text } of files) {
    const rel = relative(ROOT, file).split(sep).join('/');
    for (const rule of RULES) {
      if (!rel.startsWith(`${rule.from}/`)) continue;
      for (const imp of importsOf(file, text))
        if (rule.never.some((n) => imp === n || imp.startsWith(`${n}/`))) out.push(`${rel} → ${imp}`);
    }
  }
  return out;
}

describe('layers', () => {
  it('catches a gateway file that names a feature, also by a type import (the check itself works)', () => {
    const gw = join(ROOT, 'src/gateway/x.ts');
    expect(
      violations([
        { file: gw, text: "import { registerHostedRoutes } from '../hosted/index.ts';" },
        { file: gw, text: "import type { FleetKey } from '../fleet/keys.ts';" },
        { file: gw, text: "const m = await import('../fleet/index.ts');" },
        { file: join(ROOT, 'src/store/y.ts'), text: "import { startRelay } from '../../services/serve.ts';" },
        { file: gw, text: "import type { GatewayFeature } from './features.ts';" },
        { file: join(ROOT, 'services/serve.ts'), text: "import { hostedFeature } from '../src/hosted/index.ts';" },
      ]),
    ).toEqual([
      'src/gateway/x.ts → src/hosted/index.ts',
      'src/gateway/x.ts → src/fleet/keys.ts',
      'src/gateway/x.ts → src/fleet/index.ts',
      'src/store/y.ts → services/serve.ts',
    ]);
  });

  it('hold in src/', () => {
    const files = tsFiles(join(ROOT, 'src')).map((file) => ({ file, text: readFileSync(file, 'utf8') }));
    expect(files.filter((f) => f.file.includes(`${sep}gateway${sep}`)).length).toBeGreaterThan(10);
    expect(violations(files)).toEqual([]);
  });
});
