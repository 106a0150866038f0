import { afterEach, describe, expect, it, vi } from 'vitest';
import { readTurn, scheduleWrite, type TurnWriter } from './turn-writes.ts';

const checkPhase = () => new Promise<void>((r) => setImmediate(r));

function writer(log: string[], name: string): TurnWriter {
  return { writeQueued: () => log.push(name) };
}

describe('turn writes', () => {
  afterEach(() => vi.restoreAllMocks());

  it('outside a read: written in the check phase, not before', async () => {
    const log: string[] = [];
    scheduleWrite(writer(log, 'a'));
    scheduleWrite(writer(log, 'b'));
    await Promise.resolve();
    expect(log).toEqual([]);
    await checkPhase();
    expect(log).toEqual(['a', 'b']);
  });

  it('inside a read: written when the read returns, with what the turn queued before it', async () => {
    const log: string[] = [];
    scheduleWrite(writer(log, 'before'));
    readTurn((name: string) => {
      scheduleWrite(writer(log, name));
      expect(log).toEqual([]);
    }, 'read');
    expect(log).toEqual(['before', 'read']);
    // The check phase the first write scheduled finds nothing left; a write queued after the
    // read still goes out there, once.
    scheduleWrite(writer(log, 'after'));
    await checkPhase();
    expect(log).toEqual(['before', 'read', 'after']);
  });

  it('a write a promise continuation of the read queues waits for the check phase', async () => {
    const log: string[] = [];
    let continued!: Promise<void>;
    readTurn(() => {
      continued = Promise.resolve().then(() => scheduleWrite(writer(log, 'continuation')));
    }, undefined);
    await continued;
    expect(log).toEqual([]);
    await checkPhase();
    expect(log).toEqual(['continuation']);
  });

  it('a read that throws still writes what it queued, and the error reaches its caller', () => {
    const log: string[] = [];
    expect(() =>
      readTurn(() => {
        scheduleWrite(writer(log, 'queued'));
        throw new Error('bad frame');
      }, undefined),
    ).toThrow('bad frame');
    expect(log).toEqual(['queued']);
  });

  it('a read inside a read: the outer one writes, once', () => {
    const log: string[] = [];
    readTurn(() => {
      readTurn(() => scheduleWrite(writer(log, 'inner')), undefined);
      expect(log).toEqual([]);
      scheduleWrite(writer(log, 'outer'));
    }, undefined);
    expect(log).toEqual(['inner', 'outer']);
  });

  it('a writer that throws is reported, and the others in the turn are still written', () => {
    const warn = vi.spyOn(process, 'emitWarning').mockImplementation(() => {});
    const log: string[] = [];
    readTurn(() => {
      scheduleWrite({
        writeQueued: () => {
          throw new Error('socket freed');
        },
      });
      scheduleWrite(writer(log, 'next'));
    }, undefined);
    expect(log).toEqual(['next']);
    expect(warn).toHaveBeenCalledWith(expect.stringContaining('socket freed'));
  });
});
