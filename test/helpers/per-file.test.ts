// perFile: the set-up a test file shares is started before its tests and stopped after them.
import { describe, expect, it } from 'vitest';
import { perFile } from './per-file.ts';

const steps: string[] = [];

describe('a file that shares one set-up', () => {
  const shared = perFile(
    () => {
      steps.push('start');
      return Promise.resolve({ port: 4242 });
    },
    ({ port }) => {
      steps.push(`stop ${port}`);
      return Promise.resolve();
    },
  );

  it('has it started, and its fields filled in, by its first test', () => {
    expect(shared.port).toBe(4242);
    expect(steps).toEqual(['start']);
  });

  it('keeps the one start for every test', () => {
    expect(steps).toEqual(['start']);
  });
});

it('has it stopped after its last test, with what start gave', () => {
  expect(steps).toEqual(['start', 'stop 4242']);
});
