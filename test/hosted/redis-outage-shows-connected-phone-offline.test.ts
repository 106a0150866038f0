// Was a defect: while the relay could not reach Redis, the dashboard listed a phone whose socket is open on
// this very node as "offline" (and "Last seen" an old time instead of "now"): `bus.ownerOf` failed
// and the page turned the failure into `false` (src/hosted/dashboard.ts, `.then((o) => !!o, () => false)`).
// The person is told their phone is disconnected and starts re-pairing / debugging a phone that is
// fine; the status is unknown, not offline. Now (src/hosted/dashboard.ts `presence`): without the
// bus a phone connected to this node is online, any other "unknown", on the page and in
// /account/phones.json.
//
// Promises: docs/decisions/0210-no-phone-offline-because-redis-was-down.md, title: "A Redis
// outage never reports a connected phone offline"; docs/HOSTED.md "Pages", `GET /account`:
// "phones (online/offline cluster-wide, last seen — "now" while online —, …)".
//
// Real relay on Redis, real phone, real HTTP. Only this relay's Redis link is cut: it reaches the
// shared Redis through a TCP relay in this test, which is closed (connections reset, new ones
// refused) — what a network cut or a Redis restart looks like from the node.
import net from 'node:net';
import { randomBytes } from 'node:crypto';
import { afterAll, describe, expect, it } from 'vitest';
import { REDIS_URL } from '../cluster/harness.ts';
import { startHostedRelay, signedInWithPhone, type HostedRelay } from './hosted-relay.ts';
import { startAccountPhone } from './helpers.ts';

/** A TCP relay to Redis that can be cut. */
async function redisLink() {
  const target = new URL(REDIS_URL);
  const sockets = new Set<net.Socket>();
  const server = net.createServer((client) => {
    const upstream = net.connect(Number(target.port || 6379), target.hostname);
    sockets.add(client).add(upstream);
    client.pipe(upstream).pipe(client);
    const end = () => {
      client.destroy();
      upstream.destroy();
    };
    client.on('error', end).on('close', end);
    upstream.on('error', end).on('close', end);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  return {
    url: `redis://127.0.0.1:${(server.address() as net.AddressInfo).port}`,
    cut: () =>
      new Promise<void>((r) => {
        server.close(() => r());
        for (const s of sockets) s.destroy();
      }),
  };
}

let h: HostedRelay | undefined;
let link: Awaited<ReturnType<typeof redisLink>> | undefined;
afterAll(async () => {
  await h?.stop();
  await link?.cut().catch(() => {});
});

describe('dashboard during a Redis outage', () => {
  it('does not call a phone connected to this node "offline"', async () => {
    link = await redisLink();
    h = await startHostedRelay({
      args: ['--redis-url', link.url, '--redis-prefix', `pbrv:${randomBytes(4).toString('hex')}:`],
    });
    const { web, phone, account } = await signedInWithPhone(h, { name: 'Pixel Redis' });
    // A second phone of the account that is not connected (anywhere): during the outage this node
    // cannot know where it is, so it is "unknown", not "offline" either.
    const gone = await startAccountPhone(h.relay.relay.store.store, h.url, account.id, 'Pixel Gone');
    await gone.stop();
    const rowOf = async (deviceId: string) => {
      const page = await web.get('/account');
      expect(page.status).toBe(200);
      const i = page.html.indexOf(deviceId);
      return page.html.slice(i, page.html.indexOf('</tr>', i));
    };
    const row = () => rowOf(phone.deviceId);
    // Online through Redis first.
    const deadline = Date.now() + 10_000;
    while (!(await row()).includes('class="online"')) {
      if (Date.now() > deadline) throw new Error('the phone never showed online');
      await new Promise((r) => setTimeout(r, 100));
    }

    await link.cut();
    const during = await row();
    // The phone's socket to this node stayed open throughout: it is connected, not offline.
    expect(phone.agent.connected).toBe(true);
    expect(during).not.toContain('class="offline"');
    expect(during).toContain('class="online"');
    expect(await rowOf(gone.deviceId)).toContain('class="unknown"');
    const json = await web.get('/account/phones.json');
    expect(json.status).toBe(200);
    const online = new Map((JSON.parse(json.html) as { id: string; online: unknown }[]).map((p) => [p.id, p.online]));
    expect({ connected: online.get(phone.deviceId), gone: online.get(gone.deviceId) }).toEqual({
      connected: true,
      gone: 'unknown',
    });
  });
});
