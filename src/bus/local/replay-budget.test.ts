// The node's replay budget and each key's share of it: over either, the oldest events go —
// the key's own first — and another key's buffers are untouched.
import { describe, expect, it } from 'vitest';
import { LocalBus } from './index.ts';
import type { SessionRecord } from '../types.ts';

function session(id: string, tokenId: string): SessionRecord {
  const now = Date.now();
  return {
    id,
    tokenId,
    deviceId: 'd',
    accountId: 'a',
    revision: '2025-11-25',
    scopes: ['devices:read'],
    createdAt: now,
    lastSeenAt: now,
  };
}

const KB = 1024;
const blob = (n: number) => 'x'.repeat(n);

describe('replay budget (local bus)', () => {
  it('one key filling buffers evicts its own oldest events, never another key’s', async () => {
    const bus = new LocalBus({ replayBudget: { nodeBytes: 4000 * KB, credentialBytes: 1000 * KB } });
    await bus.sessions.create(session('victim', 'kB'), 60_000);
    await bus.appendEvent('victim', 'g', blob(200 * KB));
    for (let i = 0; i < 100; i++) {
      await bus.sessions.create(session(`s${i}`, 'kA'), 60_000);
      for (let j = 0; j < 6; j++) await bus.appendEvent(`s${i}`, 'g', blob(200 * KB));
    }
    expect(bus.budget.bytesOf('kA')).toBeLessThanOrEqual(1000 * KB);
    expect(bus.budget.bytes).toBeLessThanOrEqual(4000 * KB);
    // The newest of kA's events are kept, the oldest went; kB's buffer is whole.
    expect(await bus.replayAfter('s99', 'g:0')).toHaveLength(4);
    expect(await bus.replayAfter('s0', 'g:0')).toEqual([]);
    expect(await bus.replayAfter('victim', 'g:0')).toHaveLength(1);
    await bus.close();
  });

  it('the node budget holds across keys, oldest events first', async () => {
    const bus = new LocalBus({ replayBudget: { nodeBytes: 1000 * KB, credentialBytes: 1000 * KB } });
    for (let i = 0; i < 20; i++) {
      await bus.sessions.create(session(`s${i}`, `k${i}`), 60_000);
      await bus.appendEvent(`s${i}`, 'g', blob(200 * KB));
    }
    expect(bus.budget.bytes).toBeLessThanOrEqual(1000 * KB);
    expect(await bus.replayAfter('s0', 'g:0')).toEqual([]);
    expect(await bus.replayAfter('s19', 'g:0')).toHaveLength(1);
    expect(bus.stats().replayBuffers).toBeLessThanOrEqual(5);
    await bus.close();
  });

  it('a deleted session gives its bytes back at once', async () => {
    const bus = new LocalBus();
    await bus.sessions.create(session('s', 'k'), 60_000);
    await bus.appendEvent('s', 'g', blob(100 * KB));
    expect(bus.budget.bytesOf('k')).toBeGreaterThan(100 * KB);
    await bus.sessions.delete('s');
    expect(bus.budget.bytes).toBe(0);
    expect(bus.budget.bytesOf('k')).toBe(0);
    await bus.close();
  });
});
