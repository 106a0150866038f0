// allocate() (src/fleet/allocations.ts) on a store of each backend, embedded PGlite and the
// real Postgres, with 600 free phones in one account: the one phone matching the selector is
// found every time — a set requirement on a hand-set label, one on a fact, and the one online
// phone of an offline pool — and a selector nothing matches reads each free phone at most once
// (docs/decisions/0171-allocation-atomicity.md, "Amended"). The store's SQL part of a selector
// (freeDevices) means what matches() means, requirement by requirement. Online is this file's
// stand-in hub; test/fleet/allocation-large-pool.test.ts has real sockets.
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { allocate } from '../../src/fleet/allocations.ts';
import { allLabels } from '../../src/fleet/access.ts';
import { isFactKey, matches, parseSelector, type Selector } from '../../src/fleet/labels.ts';
import type { ResolvedFleetKey } from '../../src/fleet/keys.ts';
import type { GatewayContext } from '../../src/gateway/context.ts';
import { createStore, type Account, type DatabaseSource, type Store } from '../../src/store/index.ts';
import { embeddedBackend, postgresBackend, uid, type TestBackend } from '../../src/store/test-support.ts';
import { pairMany } from './many-phones.ts';

const POOL = 600;
/** What allocate() hands the store: the requirements on hand-set labels. */
const handSet = (sel: Selector) => sel.filter((r) => !isFactKey(r.key));
/** The phone with the hand-set label model=pixel, the one reporting model "Pixel 9", the one online. */
const LABELLED = 137;
const REPORTING = 421;
const ONLINE = 555;

for (const backend of [embeddedBackend(), postgresBackend()] as TestBackend[]) {
  describe(`allocation from a pool of ${POOL} on ${backend.name}`, () => {
    let source: DatabaseSource;
    let store: Store;
    let account: Account;
    let ids: string[];
    /** Phones this stand-in hub holds a socket of; undefined: every phone is online. */
    let online: Set<string> | undefined;
    let ctx: GatewayContext;

    beforeAll(async () => {
      source = await backend.open();
      store = await createStore(source);
      account = await store.ensureAccount(uid('acct'));
      ids = await pairMany(
        store,
        account.id,
        POOL,
        (i) => ({
          pool: 'big',
          model: i === LABELLED ? 'pixel' : `other-${i % 7}`,
          ...(i % 3 ? { rack: `r${i % 5}` } : {}),
        }),
        (i) => ({
          protocolVersion: '2025-11-25',
          serverInfo: { name: 'app', version: '1' },
          _meta: {
            'phonebridge/device': {
              model: i === REPORTING ? 'Pixel 9' : 'Galaxy',
              android: i % 100 === 7 ? '16' : '15',
            },
          },
        }),
      );
      ctx = {
        store,
        config: { nodeId: 'here' },
        hub: { device: (id: string) => (!online || online.has(id) ? {} : undefined) },
        bus: { ownerOf: () => Promise.resolve(undefined) },
      } as unknown as GatewayContext;
    }, 120_000);

    afterAll(async () => {
      await store?.close();
      await source?.close();
      await backend.cleanup();
    });

    async function keyWith(selector: string): Promise<ResolvedFleetKey> {
      const r = await store.fleet.createKey({
        id: uid('fkey'),
        accountId: account.id,
        hash: uid('hash'),
        scopes: ['devices:lease'],
        selector,
      });
      if (!r.ok) throw new Error(r.error);
      return { key: r.key, selector: parseSelector(selector), account };
    }

    /** `times` allocations in a row, each released before the next: the phone each got (undefined: none). */
    async function inTurn(fk: ResolvedFleetKey, wanted: Selector, includeOffline: boolean, times = 20) {
      const got: (string | undefined)[] = [];
      for (let i = 0; i < times; i++) {
        const a = await allocate(ctx, fk, wanted, 60_000, { includeOffline });
        got.push(a?.deviceId);
        if (a) expect(await store.fleet.releaseAllocation(a.id, fk.key.id, new Date())).toBe(true);
      }
      return got;
    }

    it('finds the one phone matching an `in` on a hand-set label, every time', async () => {
      online = undefined;
      const fk = await keyWith('model in (pixel,pixel-pro)');
      expect(await inTurn(fk, [], false)).toEqual(Array(20).fill(ids[LABELLED]));
      // The request's selector narrows the key's: nothing else matches both.
      expect(await inTurn(fk, parseSelector('rack=r0'), true, 1)).toEqual([undefined]);
    });

    it('finds the one phone whose facts match (facts are matched in the relay, past the first page)', async () => {
      online = undefined;
      const fk = await keyWith('pool=big');
      expect(await inTurn(fk, parseSelector('phonebridge.dev/model in (Pixel-9)'), false)).toEqual(
        Array(20).fill(ids[REPORTING]),
      );
    });

    it('finds the one online phone of a pool that is otherwise offline', async () => {
      online = new Set([ids[ONLINE]]);
      try {
        const fk = await keyWith('pool=big');
        expect(await inTurn(fk, [], false)).toEqual(Array(20).fill(ids[ONLINE]));
        // Asked for offline phones too, it takes any.
        const any = await inTurn(fk, [], true, 1);
        expect(ids).toContain(any[0]);
      } finally {
        online = undefined;
      }
    });

    it('concurrent callers share the few matching phones: each taken once, none missed', async () => {
      online = undefined;
      const few = ids.filter((_, i) => i % 100 === 7);
      const fk = await keyWith('pool=big');
      const wanted = parseSelector('phonebridge.dev/android in (16)');
      const results = await Promise.all(
        Array.from({ length: 12 }, () => allocate(ctx, fk, wanted, 60_000, { includeOffline: false })),
      );
      const won = results.filter((a) => a !== undefined);
      expect(new Set(won.map((a) => a.deviceId))).toEqual(new Set(few));
      expect(won).toHaveLength(few.length);
      for (const a of won) await store.fleet.releaseAllocation(a.id, fk.key.id, new Date());
    }, 120_000);

    it('with no match, reads each free phone at most once and answers none', async () => {
      online = undefined;
      const fk = await keyWith('pool=big');
      const reads = vi.spyOn(store.fleet, 'freeDevices');
      try {
        expect(
          await allocate(ctx, fk, parseSelector('phonebridge.dev/model in (none)'), 60_000, { includeOffline: true }),
        ).toBe(undefined);
        const pages = await Promise.all(reads.mock.results.map((r) => r.value as Promise<{ id: string }[]>));
        // The random first page, then keyset pages: every free phone read, none twice after it.
        const walked = pages
          .slice(1)
          .flat()
          .map((d) => d.id);
        expect(new Set(walked).size).toBe(walked.length);
        expect(new Set([...pages[0].map((d) => d.id), ...walked])).toEqual(new Set(ids));
        expect(walked.length).toBe(POOL - 1);
        expect(reads.mock.calls.length).toBeLessThanOrEqual(1 + Math.ceil(POOL / 128) + 2);
      } finally {
        reads.mockRestore();
      }
    });

    it('filters hand-set labels in SQL as matches() does, for every kind of requirement', async () => {
      const some = ids.slice(0, 40);
      await store.fleet.updateLabels(some[0], { set: { blank: '' }, remove: [] });
      await store.fleet.updateLabels(some[1], { set: { blank: 'x' }, remove: [] });
      const selectors = [
        'rack',
        '!rack',
        'rack=r1',
        'rack!=r1',
        'rack in (r1,r2)',
        'rack notin (r1,r2)',
        'rack notin (r1),model!=other-3,pool',
        'blank=',
        'blank!=',
        'blank',
        '!blank',
        'blank in (x)',
        'model in (pixel),rack notin (r2)',
        'rack=r1,rack=r2',
        'nosuch notin (a),!nosuch',
        '',
      ];
      const all = (await store.fleet.listDevices({ accountId: account.id })).map((d) => ({ ...d, initResult: null }));
      for (const text of selectors) {
        const sel = parseSelector(text);
        const want = all.filter((d) => matches(sel, allLabels(d))).map((d) => d.id);
        // Every free phone the SQL part lets through, page by page in id order.
        const got: string[] = [];
        let after: string | undefined;
        for (;;) {
          const page = await store.fleet.freeDevices(account.id, handSet(sel), new Date(), 250, { after });
          got.push(...page.map((d) => d.id));
          if (page.length < 250) break;
          after = page[page.length - 1].id;
        }
        // The SQL part is the whole selector here (no facts): exactly the matching phones, each once.
        expect({ text, got: new Set(got) }).toEqual({ text, got: new Set(want) });
        expect(got).toHaveLength(want.length);
        const random = await store.fleet.freeDevices(account.id, handSet(sel), new Date(), 1000);
        expect(new Set(random.map((d) => d.id))).toEqual(new Set(want));
      }
    });
  });
}
