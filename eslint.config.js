// Type-aware linting (typescript-eslint's type-checked rule sets). The rules that matter most
// here guard async uWebSockets.js code: a floating promise or a promise passed where a
// callback's result is ignored is a crash or a lost answer. Why this linter and these rules:
// docs/decisions/0017-linter-typescript-eslint.md.
import js from '@eslint/js';
import tseslint from 'typescript-eslint';

export default tseslint.config(
  {
    ignores: [
      'node_modules/',
      '.tools/',
      '.phonebridge/',
      '.tmp/',
      '.scratch/',
      'dist/',
      'coverage/',
      'test/fleet/generated/',
    ],
  },
  js.configs.recommended,
  ...tseslint.configs.recommendedTypeChecked,
  {
    languageOptions: {
      parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname },
    },
    rules: {
      '@typescript-eslint/no-floating-promises': 'error',
      '@typescript-eslint/no-misused-promises': 'error',
      '@typescript-eslint/await-thenable': 'error',
      '@typescript-eslint/switch-exhaustiveness-check': 'error',
      '@typescript-eslint/consistent-type-imports': ['error', { fixStyle: 'inline-type-imports' }],
      // Kysely's values come through src/store/kysely.ts (its CommonJS build, one copy).
      '@typescript-eslint/no-restricted-imports': [
        'error',
        {
          paths: [
            {
              name: 'kysely',
              message: 'import values from src/store/kysely.ts (types may come from kysely)',
              allowTypeImports: true,
            },
          ],
        },
      ],
      // A leading underscore marks a parameter or destructured field that is deliberately unused.
      '@typescript-eslint/no-unused-vars': [
        'error',
        { argsIgnorePattern: '^_', varsIgnorePattern: '^_', destructuredArrayIgnorePattern: '^_' },
      ],
    },
  },
  {
    // Tests inspect arbitrary JSON (wire frames, MCP results, metrics) whose shape is the very
    // thing under test, so typing every parsed value would only restate the assertions. The
    // async rules stay on here as everywhere: a floating promise in a test hides a failure.
    // Load scenarios (loadtest/) are the same kind of code: they read answers, reports and
    // /metrics as data.
    files: ['**/*.test.ts', 'test/**', '**/test-*.ts', 'src/store/store-suite.ts', 'loadtest/**'],
    rules: {
      '@typescript-eslint/no-unsafe-member-access': 'off',
      '@typescript-eslint/no-unsafe-assignment': 'off',
      '@typescript-eslint/no-unsafe-argument': 'off',
      '@typescript-eslint/no-unsafe-call': 'off',
      '@typescript-eslint/no-unsafe-return': 'off',
      '@typescript-eslint/no-explicit-any': 'off',
    },
  },
  {
    // Load scenarios add up figures from many concurrent callers: `total += await call()` reads
    // `total` before the await and loses what the other callers added meanwhile.
    files: ['loadtest/**'],
    rules: { 'require-atomic-updates': ['error', { allowProperties: true }] },
  },
  {
    // Node defines these three globals as accessors on globalThis: optimised code reads them
    // through a global-load IC and the getter on every use (performance.now() 594 instructions
    // against 355 imported; docs/decisions/0256-node-globals-imported.md). The relay imports them.
    files: ['src/**/*.ts'],
    ignores: ['**/*.test.ts', '**/test-*.ts', 'src/store/store-suite.ts'],
    rules: {
      'no-restricted-globals': [
        'error',
        { name: 'Buffer', message: "import { Buffer } from 'node:buffer' (the global is an accessor)" },
        { name: 'performance', message: "import { performance } from 'node:perf_hooks' (the global is an accessor)" },
        { name: 'process', message: "import process from 'node:process' (the global is an accessor)" },
      ],
    },
  },
  {
    files: ['**/*.js', '**/*.mjs'],
    ...tseslint.configs.disableTypeChecked,
  },
  {
    files: ['bin/*.mjs'],
    languageOptions: { globals: { process: 'readonly' } },
  },
);
