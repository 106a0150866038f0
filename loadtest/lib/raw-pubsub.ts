// Redis pub/sub without a client library, for measurements: the least a process can do to send
// and hear messages through Redis (loadtest/node-hop.bench.ts's `raw` way, and the two-node
// uWS floor of loadtest/baseline/uws-floor.ts). One connection publishes with replies off
// (CLIENT REPLY OFF, as src/bus/redis/quiet.ts does), one is subscribed to a channel. No
// reconnect, no confirmation, no TLS: nothing but a message's bytes.
import { createConnection, type Socket } from 'node:net';
import { PushReader } from '../../src/bus/redis/push-reader.ts';

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
  let subscribed: () => void = () => {};
  const ready = new Promise<void>((r) => (subscribed = r));
  // The relay's own reader (src/bus/redis/push-reader.ts): messages to `on`, and the only
  // other frame this connection gets, SUBSCRIBE's reply, means it is listening.
  const reader = new PushReader(
    (b, at) => on(b.toString('utf8', at.payloadStart, at.payloadEnd)),
    () => subscribed(),
  );
  sub.on('data', (chunk: Buffer) => reader.write(chunk));
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
