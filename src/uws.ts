// Loads the native uWebSockets.js binary directly. The package silently falls back to a
// slow JS shim when the binary does not load; we refuse to start instead.
import process from 'node:process';
import { createRequire } from 'node:module';
import type * as UWS from 'uWebSockets.js';

const require = createRequire(import.meta.url);

function loadNative(): typeof UWS {
  const file = `uWebSockets.js/binaries/uws_${process.platform}_${process.arch}_${process.versions.modules}.node`;
  try {
    return require(file) as typeof UWS;
  } catch (err) {
    throw new Error(
      `uWebSockets.js native binary did not load (${file}): ${(err as Error).message}. phonebridge will not run on the slow fallback.`,
      { cause: err },
    );
  }
}

export const uws = loadNative();
export type { HttpRequest, HttpResponse, TemplatedApp, WebSocket, us_listen_socket } from 'uWebSockets.js';

type ListenCallback = (socket: UWS.us_listen_socket | false) => void;

/**
 * Listens without SO_REUSEPORT (uWS's default shares the port with any other process that asks).
 * The binary exports LIBUS_LISTEN_EXCLUSIVE_PORT and takes (host, port, options, cb); the
 * typings lack that overload.
 */
export function listenExclusive(app: UWS.TemplatedApp, host: string, port: number, cb: ListenCallback): void {
  const flag = (uws as unknown as { LIBUS_LISTEN_EXCLUSIVE_PORT: number }).LIBUS_LISTEN_EXCLUSIVE_PORT;
  if (flag === undefined) throw new Error('uWebSockets.js does not export LIBUS_LISTEN_EXCLUSIVE_PORT');
  (app.listen as unknown as (h: string, p: number, o: number, c: ListenCallback) => void).call(
    app,
    host,
    port,
    flag,
    cb,
  );
}
