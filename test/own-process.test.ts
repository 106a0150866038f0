// The split of test/ between shared workers and processes of their own (test/own-process.ts).
import { expect, it } from 'vitest';
import { needsOwnProcess, ownProcessFiles } from './own-process.ts';

it('gives a process of its own to a file that mocks, changes the environment or timers, or reads metrics', () => {
  expect(needsOwnProcess(`vi.mock('@opentelemetry/core', () => ({}));`)).toBe(true);
  expect(needsOwnProcess(`process.env.OTEL_SDK_DISABLED = 'true';`)).toBe(true);
  expect(needsOwnProcess(`process.env['X'] = '1';`)).toBe(true);
  expect(needsOwnProcess(`delete process.env[k];`)).toBe(true);
  expect(needsOwnProcess(`vi.useFakeTimers();`)).toBe(true);
  expect(needsOwnProcess(`import { sample } from '../helpers/metrics.ts';`)).toBe(true);
  expect(needsOwnProcess(`import { registry } from '../../src/metrics.ts';`)).toBe(true);
  expect(needsOwnProcess(`relay = await startTestRelay();\nawait fetch(\`\${admin}/metrics\`);`)).toBe(true);
  expect(needsOwnProcess(`// test: own process (reason)\nit('x', () => {});`)).toBe(true);
});

it('leaves in a shared worker a file that only reads the environment or scrapes a child process', () => {
  expect(needsOwnProcess(`const url = process.env.PHONEBRIDGE_TEST_REDIS_URL ?? 'redis://127.0.0.1:6379';`)).toBe(
    false,
  );
  expect(needsOwnProcess(`if (process.env.CI === '1') {}`)).toBe(false);
  expect(needsOwnProcess(`spawn('node', args, { env: { ...process.env, X: '1' } });`)).toBe(false);
  expect(needsOwnProcess(`const child = startRelayProcess();\nawait fetch(\`\${child.admin}/metrics\`);`)).toBe(false);
  expect(needsOwnProcess(`const looks = vi.spyOn(store.fleet, 'freeDevices');`)).toBe(false);
});

it('finds the files of test/ that read the registry in-process', () => {
  const own = ownProcessFiles();
  expect(own).toContain('test/relay/http-metrics.test.ts');
  expect(own).toContain('test/relay/metrics-at-start.test.ts');
  expect(own).toContain('test/observability/tracing-off-no-propagator.test.ts');
  expect(own).not.toContain('test/relay/e2e.test.ts');
});
