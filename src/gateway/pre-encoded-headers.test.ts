// Exchange.send with a preEncoded header set (http.ts): a real uWS server writes the same head,
// byte for byte, as for the same headers given as strings; the set is frozen, and one built per
// answer from it (spread, another member added) is written from its strings, whole.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { connect } from 'node:net';
import { uws, listenExclusive, type us_listen_socket } from '../uws.ts';
import { Exchange, preEncoded } from './http.ts';
import { JSON_HEADERS } from './mcp-stateless.ts';

const SET = preEncoded({ 'Content-Type': 'application/json', 'X-Two': 'b' });
let listening: us_listen_socket;
let port = 0;

beforeAll(async () => {
  const app = uws.App();
  app.get('/encoded', (res) => new Exchange(res).send(200, SET, '{"a":1}'));
  app.get('/plain', (res) =>
    new Exchange(res).send(200, { 'Content-Type': 'application/json', 'X-Two': 'b' }, '{"a":1}'),
  );
  app.get('/spread', (res) => new Exchange(res).send(403, { ...JSON_HEADERS, Allow: 'POST' }, '{}'));
  app.get('/closing', (res) => new Exchange(res).send(404, SET, '{}', true));
  await new Promise<void>((resolve, reject) =>
    listenExclusive(app, '127.0.0.1', 0, (s) => {
      if (!s) return reject(new Error('listen failed'));
      listening = s;
      port = uws.us_socket_local_port(s);
      resolve();
    }),
  );
});
afterAll(() => uws.us_listen_socket_close(listening));

/** One GET over a fresh connection: the answer's head, without the Date line (it may tick). */
function head(path: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1');
    let buf = '';
    socket.on('data', (d) => {
      buf += d.toString('latin1');
      const end = buf.indexOf('\r\n\r\n');
      if (end < 0) return;
      socket.destroy();
      resolve(
        buf
          .slice(0, end)
          .split('\r\n')
          .filter((l) => !/^date:/i.test(l))
          .join('\r\n'),
      );
    });
    socket.on('error', reject);
    socket.write(`GET ${path} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n`);
  });
}

describe('preEncoded header sets', () => {
  it('are written exactly as the same headers given as strings', async () => {
    const [encoded, plain] = await Promise.all([head('/encoded'), head('/plain')]);
    expect(encoded).toBe(plain);
    expect(encoded).toMatch(/^HTTP\/1\.1 200 OK\r\n/);
    expect(encoded).toMatch(/\r\nContent-Type: application\/json\r\nX-Two: b\r\n/);
    expect(encoded).toMatch(/\r\nKeep-Alive: timeout=\d+/);
  });

  it('are frozen; a set made from one per answer is written from its strings, every member', async () => {
    expect(Object.isFrozen(SET) && Object.isFrozen(JSON_HEADERS)).toBe(true);
    expect(() => ((JSON_HEADERS as Record<string, string>)['X-Late'] = 'x')).toThrow(TypeError);
    const spread = await head('/spread');
    expect(spread).toMatch(/^HTTP\/1\.1 403 Forbidden\r\n/);
    expect(spread).toMatch(/\r\nContent-Type: application\/json\r\nAllow: POST\r\n/);
  });

  it('close the connection when asked, with no Keep-Alive hint', async () => {
    const closing = await head('/closing');
    expect(closing).toMatch(/^HTTP\/1\.1 404 Not Found\r\n/);
    expect(closing).toMatch(/\r\nContent-Type: application\/json\r\nX-Two: b\r\n/);
    expect(closing).not.toMatch(/Keep-Alive/);
  });
});
