// Redis pub/sub without a client library, for measurements: the least a process can do to send
// and hear messages through Redis (loadtest/node-hop.bench.ts's `raw` way, and the two-node
// uWS floor of loadtest/baseline/uws-floor.ts). One connection publishes with replies off
// (CLIENT REPLY OFF, as src/bus/redis/quiet.ts does), one is subscribed to a channel. No
// reconnect, no confirmation, no TLS: nothing but a message's bytes.
import { createConnection, type Socket } from 'node:net';

export interface RawPubSub {
  publish(channel: string, msg: string): void;
  close(): void;
}

/** A bulk string in RESP. */
const bulk = (s: string) => `$${Buffer.byteLength(s)}\r\n${s}\r\n`;

/**
 * Subscribes to `listen` on the Redis at `url`; each message's payload reaches `on`. With
 * `perTurn`, a turn's publishes leave in one write at its end (setImmediate), as the relay's
 * bus writes (docs/decisions/0132-cluster-path.md); otherwise one write each.
 */
export async function rawPubSub(
  url: string,
  listen: string,
  on: (msg: string) => void,
  opts: { perTurn?: boolean } = {},
): Promise<RawPubSub> {
  const { hostname, port } = new URL(url);
  const open = async (): Promise<Socket> => {
    const s = createConnection({ host: hostname, port: Number(port || 6379) });
    s.setNoDelay(true);
    await new Promise<void>((resolve, reject) => {
      s.once('connect', () => resolve());
      s.once('error', reject);
    });
    return s;
  };
  const pub = await open();
  pub.write(`*3\r\n${bulk('CLIENT')}${bulk('REPLY')}${bulk('OFF')}`);
  const sub = await open();
  let buf: Buffer = Buffer.alloc(0);
  let subscribed: () => void = () => {};
  const ready = new Promise<void>((r) => (subscribed = r));
  // Each push is *3 of bulk strings: message, channel, payload (or subscribe, channel, :count).
  const line = (at: number) => {
    const end = buf.indexOf('\r\n', at);
    return end < 0 ? undefined : { text: buf.toString('latin1', at, end), next: end + 2 };
  };
  sub.on('data', (chunk: Buffer) => {
    buf = buf.length === 0 ? chunk : Buffer.concat([buf, chunk]);
    let at = 0;
    for (;;) {
      const head = line(at);
      if (!head || head.text !== '*3') break;
      const parts: string[] = [];
      let next = head.next;
      for (let i = 0; i < 3 && next >= 0; i++) {
        const h = line(next);
        if (!h) next = -1;
        else if (h.text[0] === ':') {
          parts.push(h.text.slice(1));
          next = h.next;
        } else {
          const n = Number(h.text.slice(1));
          if (buf.length < h.next + n + 2) next = -1;
          else {
            parts.push(buf.toString('utf8', h.next, h.next + n));
            next = h.next + n + 2;
          }
        }
      }
      if (next < 0) break;
      at = next;
      if (parts[0] === 'message') on(parts[2]);
      else if (parts[0] === 'subscribe') subscribed();
    }
    buf = at === buf.length ? Buffer.alloc(0) : buf.subarray(at);
  });
  sub.write(`*2\r\n${bulk('SUBSCRIBE')}${bulk(listen)}`);
  await ready;

  let queued: string[] = [];
  const flush = () => {
    const out = queued;
    queued = [];
    pub.write(out.length === 1 ? out[0] : out.join(''));
  };
  const command = (channel: string, msg: string) => `*3\r\n${bulk('PUBLISH')}${bulk(channel)}${bulk(msg)}`;
  return {
    publish: opts.perTurn
      ? (channel, msg) => {
          if (queued.push(command(channel, msg)) === 1) setImmediate(flush);
        }
      : (channel, msg) => void pub.write(command(channel, msg)),
    close: () => {
      pub.destroy();
      sub.destroy();
    },
  };
}
