// Raw HTTP/1.1 on one connection, for what fetch hides: a HEAD answer's bytes, and what follows it.
import { connect } from 'node:net';

/**
 * HEAD `path`, then (once its header block is in) GET `next` on the same connection; returns
 * every byte the relay sent once they hold `until`. A body after the HEAD answer would be read
 * as the start of the GET's answer. (Not pipelined: uWS closes a connection that sends a request before the
 * previous one is answered.)
 */
export function headThenGet(port: number, path: string, next = '/healthz', until = '"status":"ok"'): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1');
    let text = '';
    let sentGet = false;
    const timer = setTimeout(() => {
      socket.destroy();
      reject(new Error(`no complete answer; got ${JSON.stringify(text)}`));
    }, 5000);
    socket.on('data', (d) => {
      text += d.toString('latin1');
      if (!sentGet && text.includes('\r\n\r\n')) {
        sentGet = true;
        socket.write(`GET ${next} HTTP/1.1\r\nHost: x\r\n\r\n`);
      }
      if (text.includes(until)) {
        clearTimeout(timer);
        socket.destroy();
        resolve(text);
      }
    });
    socket.on('error', reject);
    socket.write(`HEAD ${path} HTTP/1.1\r\nHost: x\r\n\r\n`);
  });
}

/** The answers in `text`, split at each status line. */
export const responses = (text: string) => text.split(/(?=HTTP\/1\.1 \d{3} )/);
