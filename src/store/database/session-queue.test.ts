// The session rule of the embedded store's socket (session-queue.ts; decision 0011, "Amended"):
// "a connection holds the session from its first message until PGlite answers it ReadyForQuery
// with status idle (`I`) … the others' messages wait, first come first served; a connection that
// leaves while holding it has its exchange aborted … and gives it back".
import { rmSync } from 'node:fs';
import { createConnection } from 'node:net';
import { join } from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { tempDataDir } from '../test-support.ts';
import { serveEmbedded } from './embedded.ts';
import { ReadyWatcher } from './session-queue.ts';
import type { DatabaseSource } from './types.ts';

const dir = tempDataDir();
let source: DatabaseSource;
beforeAll(async () => {
  source = await serveEmbedded(dir);
  const c = new pg.Client(source.pgConfig);
  await c.connect();
  await c.query('create table if not exists queue_probe (v int)');
  await c.end();
}, 60_000);
afterAll(async () => {
  await source?.close();
  rmSync(dir, { recursive: true, force: true });
});

async function client(): Promise<pg.Client> {
  const c = new pg.Client({ ...source.pgConfig, query_timeout: 10_000 });
  c.on('error', () => {});
  await c.connect();
  return c;
}

it('a transaction holds the session: another connection waits until it commits, then sees its row', async () => {
  const a = await client();
  const b = await client();
  await a.query('begin');
  await a.query('insert into queue_probe values ($1)', [1]);
  let seen: number | undefined;
  const read = b.query<{ n: number }>('select count(*)::int as n from queue_probe where v = $1', [1]).then((r) => {
    seen = r.rows[0].n;
  });
  await new Promise((r) => setTimeout(r, 200));
  expect(seen).toBeUndefined();
  await a.query('commit');
  await read;
  expect(seen).toBe(1);
  await Promise.all([a.end(), b.end()]);
});

it('a connection that goes away inside a transaction gives the session back, its work rolled back', async () => {
  const a = await client();
  const b = await client();
  await a.query('begin');
  await a.query('insert into queue_probe values ($1)', [2]);
  const read = b.query<{ n: number }>('select count(*)::int as n from queue_probe where v = $1', [2]);
  (a as unknown as { connection: { stream: { destroy(): void } } }).connection.stream.destroy();
  expect((await read).rows[0].n).toBe(0);
  await b.end();
});

it('a connection that goes away in the middle of an extended query (no Sync) gives the session back', async () => {
  // Startup, then Parse + Bind + Execute of an insert with no Sync, then the socket closes.
  const sock = createConnection(join(dir, '.s.PGSQL.5432'));
  await new Promise((r) => sock.once('connect', r));
  const msg = (type: string, body: Buffer) => {
    const head = Buffer.alloc(5);
    head.write(type, 0);
    head.writeInt32BE(body.length + 4, 1);
    return Buffer.concat([head, body]);
  };
  const params = Buffer.from('user\0postgres\0database\0postgres\0\0');
  const startup = Buffer.alloc(8);
  startup.writeInt32BE(8 + params.length, 0);
  startup.writeInt32BE(196608, 4);
  sock.write(Buffer.concat([startup, params]));
  await new Promise((r) => setTimeout(r, 300)); // its ReadyForQuery
  sock.write(
    Buffer.concat([
      msg('P', Buffer.from('\0insert into queue_probe values (3)\0\0\0')),
      msg('B', Buffer.from('\0\0\0\0\0\0\0\0')),
      msg('E', Buffer.from('\0\0\0\0\0')),
    ]),
  );
  await new Promise((r) => setTimeout(r, 300)); // ParseComplete, BindComplete, CommandComplete
  // Another connection's start-up (and then its query) waits for the session …
  const b = new pg.Client({ ...source.pgConfig, query_timeout: 10_000 });
  b.on('error', () => {});
  let connected = false;
  const read = b.connect().then(() => {
    connected = true;
    return b.query<{ n: number }>('select count(*)::int as n from queue_probe where v = $1', [3]);
  });
  await new Promise((r) => setTimeout(r, 200));
  expect(connected).toBe(false);
  // … until the holder leaves: its insert, never synced, is rolled back.
  sock.destroy();
  expect((await read).rows[0].n).toBe(0);
  await b.end();
});

/** A backend message: type, length, body. */
function backendMessage(type: string, body: Buffer): Buffer {
  const head = Buffer.alloc(5);
  head[0] = type.charCodeAt(0);
  head.writeInt32BE(4 + body.length, 1);
  return Buffer.concat([head, body]);
}
const complete = (tag: string) => backendMessage('C', Buffer.from(`${tag}\0`));
const readyIdle = backendMessage('Z', Buffer.from('I'));

it('counts the statements that may have written by their CommandComplete tags, in whatever chunks the answer comes', () => {
  const answers: Array<[Buffer, number]> = [
    [Buffer.concat([complete('SELECT 1'), readyIdle]), 0],
    [Buffer.concat([complete('INSERT 0 1'), readyIdle]), 1],
    [Buffer.concat([complete('BEGIN'), complete('INSERT 0 1'), complete('COMMIT'), readyIdle]), 3],
    [Buffer.concat([complete('UPDATE 2'), complete('DELETE 0'), readyIdle]), 2],
    // Tags that start like SELECT's and part from it, and a SELECT of many rows.
    [Buffer.concat([complete('SET'), complete('SELECT 12345'), complete('SAVEPOINT'), readyIdle]), 2],
    // Rows before the tag do not read as one (a DataRow whose bytes spell INSERT).
    [Buffer.concat([backendMessage('D', Buffer.from('INSERT')), complete('SELECT 1'), readyIdle]), 0],
  ];
  for (const [answer, writes] of answers)
    for (let cut = 0; cut <= answer.length; cut++) {
      // The same answer in two chunks cut anywhere, and byte by byte.
      const w = new ReadyWatcher();
      w.feed(answer.subarray(0, cut));
      w.feed(answer.subarray(cut));
      expect({ cut, writes: w.writes, ready: w.ready }).toEqual({ cut, writes, ready: 0x49 });
    }
  const bytewise = new ReadyWatcher();
  for (const b of Buffer.concat([complete('SELECT 1'), complete('COMMIT'), readyIdle])) bytewise.feed(Uint8Array.of(b));
  expect(bytewise.writes).toBe(1);
  // A CommandComplete too short to be a SELECT's counts (no real tag is, but the count errs on the side of a read).
  const short = new ReadyWatcher();
  short.feed(Buffer.concat([backendMessage('C', Buffer.from('SEL')), readyIdle]));
  expect(short.writes).toBe(1);
});

it("moves the source's change count for every connection's writes, not for reads", async () => {
  const count = () => source.changeCount!();
  const a = await client();
  const b = await client();
  const start = count();
  await a.query('select count(*) from queue_probe');
  await b.query({ text: 'select v from queue_probe where v = $1', values: [9], name: 'probe-read' });
  await b.query({ text: 'select v from queue_probe where v = $1', values: [9], name: 'probe-read' });
  expect(count()).toBe(start);
  await b.query('insert into queue_probe values (9)');
  expect(count()).toBe(start + 1);
  await a.query('begin');
  await a.query('delete from queue_probe where v = 9');
  await a.query('commit');
  expect(count()).toBe(start + 4);
  await a.end();
  await b.end();
});
